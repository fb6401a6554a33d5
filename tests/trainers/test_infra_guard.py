"""A batch whose every episode failed on infrastructure stops the run instead of becoming an update of
no samples or a 0.0 evaluation; one episode that ran is enough to go on."""
import pytest

from nextstate.types import Trajectory
from trainers.infra_guard import InfraStreak, InfrastructureDown, require_some_ran


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


def test_async_loops_stop_at_the_limit_th_group_in_a_row_that_never_ran():
    streak = InfraStreak(limit=3)
    down = [_episode("a", "Docker daemon is not reachable")] * 2
    streak.see(0, down)
    streak.see(1, down)
    streak.see(2, [_episode("b", "container exited 137"), _episode("b", None)])  # one ran: the streak starts over
    streak.see(3, down)
    streak.see(4, down)
    with pytest.raises(InfrastructureDown, match=r"every one of the 6 episodes of the last 3 rollout groups "
                                                 r"\(up to group 5\) failed on infrastructure \(6 of them: Docker"):
        streak.see(5, down)
    with pytest.raises(ValueError, match="limit >= 1"):
        InfraStreak(0)
