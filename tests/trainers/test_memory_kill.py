"""A trainer killed by Ray's memory monitor (a batch that does not fit) costs no sample and does not end
the run: the trainer restarts from its checkpoint and redoes the update. (Ray reports such a kill as
`ActorUnavailableError` while the actor may restart, as `OutOfMemoryError` once it may not: the loops
take both as a death, `trainers/ray_loops.ACTOR_GONE`.) Real Ray, a real memory monitor with its
threshold set just above what this machine uses now."""
import functools

import psutil
import pytest
import ray

from tests.trainers import fake_roles
from tests.trainers.test_ray_cluster import _trained_once
from trainers.ray_loops import RayLoops, Roles
from trainers.ray_runtime import RayConfig, ray_session

HOG_GB = 6.0
MARGIN_GB = 3.0  # what other processes may grow by during the test without Ray killing its own workers


@pytest.fixture
def ray_with_a_tight_memory_monitor(monkeypatch):
    vm = psutil.virtual_memory()
    used_gb, total_gb = (vm.total - vm.available) / 2**30, vm.total / 2**30
    if total_gb - used_gb < HOG_GB + 3:
        pytest.skip(f"needs {HOG_GB + 3:.0f} GB free, {total_gb - used_gb:.1f} GB here")
    if ray.is_initialized():
        ray.shutdown()
    # the raylet reads its settings from RAY_* variables: kill when usage passes now + MARGIN_GB,
    # checked every 100 ms
    monkeypatch.setenv("RAY_memory_usage_threshold", f"{min(0.95, (used_gb + MARGIN_GB) / total_gb):.3f}")
    monkeypatch.setenv("RAY_memory_monitor_refresh_ms", "100")
    with ray_session(RayConfig(address=None)):
        yield


@pytest.mark.slow  # allocates 6 GB; it needs a machine whose other processes' memory holds still
def test_a_trainer_killed_for_memory_loses_no_sample_and_the_run_goes_on(ray_with_a_tight_memory_monitor,
                                                                         tmp_path):
    checkpoint = str(tmp_path / "trainer.json")
    roles = Roles(functools.partial(fake_roles.Rollout, 0.05), functools.partial(fake_roles.Judge, 0.0),
                  functools.partial(fake_roles.MemoryHogTrainer, checkpoint=checkpoint, hog_at=3, hog_gb=HOG_GB,
                                    marker=str(tmp_path / "hogged")))
    loops = RayLoops(roles, workers=2, batch_size=4, max_staleness=100)
    reports = loops.run(updates=4, on_update=lambda r: loops.save({"version": r.version}))
    assert (tmp_path / "hogged").exists()  # the update that did not fit was tried
    assert [r.version for r in reports] == [1, 2, 3, 4]
    assert reports[2].restarts == {"trainer": 1}
    assert [r.stats["weights"] for r in reports] == [1, 2, 3, 4]  # redone from the checkpoint of version 2
    _trained_once(reports)
