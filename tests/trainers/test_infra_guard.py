"""A batch whose every episode failed on infrastructure stops the run instead of becoming an update of
no samples or a 0.0 evaluation; one episode that ran is enough to go on."""
import pytest

from nextstate.types import Trajectory
from trainers.infra_guard import InfrastructureDown, require_some_ran


def _episode(task: str, reason: str | None) -> Trajectory:
    return Trajectory(task, "terminal", infra_failure=reason is not None, infra_reason=reason or "")


def test_a_batch_that_never_ran_stops_the_run_naming_its_commonest_reason():
    batch = [_episode("a", "Docker daemon is not reachable")] * 3 + [_episode("b", "container exited 137")]
    with pytest.raises(InfrastructureDown) as stopped:
        require_some_ran(batch, "the rollouts of update 11")
    said = str(stopped.value.code)
    assert said.startswith("[nextstate] every one of the 4 episodes of the rollouts of update 11 failed")
    assert "(3 of them: Docker daemon is not reachable; 1 other reason(s))" in said


def test_one_episode_that_ran_or_an_empty_batch_goes_on():
    require_some_ran([_episode("a", "Docker daemon is not reachable"), _episode("b", None)], "a batch")
    require_some_ran([], "an empty batch")
