"""The async modes' engine on a real local Ray, with stand-in roles in place of the model and envs
(tests/trainers/fake_roles.py): batches are full, staleness is bounded, workers are held during a
weight swap, rollouts go on while the trainer updates, errors surface and no actor is left."""
import functools
import time

import pytest
import ray
from ray.exceptions import RayActorError

from tests.paths import ROOT
from tests.trainers import fake_roles
from trainers.gate import Gate, Stopped
from trainers.infra_guard import InfraStreak, InfrastructureDown
from trainers.ray_loops import Placement, RayLoops, Roles, Versioned, within_staleness
from trainers.ray_runtime import RayConfig, ray_session


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    with ray_session(RayConfig(address=None, local_resources=["docker"])):
        yield


def _loops(update_s=0.0, produce_s=0.0, publish_s=0.0, *, judge_s=0.0, fail_in=None, checkpoint=None, **kw):
    roles = Roles(functools.partial(fake_roles.Rollout, produce_s, fail_at=3 if fail_in == "produce" else None),
                  functools.partial(fake_roles.Judge, judge_s, fail=fail_in == "judge"),
                  functools.partial(fake_roles.Trainer, update_s, publish_s, fail=fail_in == "update",
                                    checkpoint=checkpoint))
    return RayLoops(roles, **kw)


def _batches(reports):
    return [r.stats["batch"] for r in reports]


def _all_gone(loops):
    """Every actor of the loops is dead (a call on it fails) within a few seconds of `run` ending."""
    deadline = time.monotonic() + 10
    for a in [*loops.rollout_actors, *loops.judge_actors, loops.trainer]:
        while True:
            try:
                ray.get(a.close.remote(), timeout=10)
            except RayActorError:
                break
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)
    return True


def test_only_samples_within_the_staleness_bound():
    pending = [Versioned(v, i, f"s{i}") for i, v in enumerate([0, 1, 2, 3, 3])]
    kept, dropped = within_staleness(pending, version=3, max_staleness=1)
    assert [t.item for t in kept] == ["s2", "s3", "s4"] and dropped == 2
    kept, dropped = within_staleness(pending, version=3, max_staleness=0)
    assert [t.item for t in kept] == ["s3", "s4"] and dropped == 3
    assert within_staleness([], 5, 0) == ([], 0)


def test_gate_holds_workers_during_a_swap_and_stops_them():
    import threading

    gate = Gate(version=4)
    assert gate.wait_open() == 4
    gate.pause()
    got = []
    worker = threading.Thread(target=lambda: got.append(gate.wait_open()))
    worker.start()
    time.sleep(0.2)
    assert got == []  # held while the weights are swapped
    gate.resume(5)
    worker.join(2)
    assert got == [5] and gate.waited_s >= 0.15
    gate.stop()
    with pytest.raises(Stopped):
        gate.wait_open()


def test_loops_make_full_batches_of_fresh_samples():
    loops = _loops(update_s=0.05, workers=3, batch_size=4, max_staleness=1)
    judged = []
    reports = loops.run(updates=5, on_judged=lambda t, counts: judged.append(t.group_no))
    assert [r.version for r in reports] == [1, 2, 3, 4, 5] and loops.version == 5
    assert all(r.samples == 4 and len(b) == 4 for r, b in zip(reports, _batches(reports)))
    assert all(s <= 1 for r in reports for s in r.staleness)
    assert all(r.stats["loss"] == 0.5 and r.stats["weights"] == r.version for r in reports)
    assert [r.stats["published_before"] for r in reports] == [0, 1, 2, 3, 4]  # every update was published
    used = [s for b in _batches(reports) for s in b]
    assert len(used) == len(set(used))  # no sample trains twice
    assert len(judged) >= 10 and _all_gone(loops)


def test_with_no_staleness_allowed_samples_rolled_out_during_an_update_are_dropped():
    loops = _loops(update_s=0.3, produce_s=0.02, workers=2, batch_size=2, max_staleness=0)
    reports = loops.run(updates=4)
    assert all(s == 0 for r in reports for s in r.staleness)
    assert sum(r.dropped_stale for r in reports) > 0


def test_workers_are_held_while_the_weights_are_swapped():
    loops = _loops(publish_s=0.3, produce_s=0.01, workers=2, batch_size=40, max_staleness=1)
    reports = loops.run(updates=2)
    assert all(r.publish_s >= 0.3 for r in reports)
    assert loops.held_s > 0.1


def test_rollouts_go_on_while_the_trainer_updates():
    loops = _loops(update_s=0.5, produce_s=0.02, workers=2, batch_size=8, max_staleness=1)
    reports = loops.run(updates=3)
    a, b = reports[1].stats["updating"]  # (the first update also waits for the trainer actor to start)
    started = [s for r in reports[2:] for s in r.stats["started"] if a < s < b]
    assert len(started) >= 4  # while the trainer updates, the next batch is being rolled out


def test_rollouts_stay_about_one_batch_ahead_of_a_slow_trainer():
    loops = _loops(update_s=0.2, workers=3, batch_size=4, max_staleness=1)
    reports = loops.run(updates=5)
    # instant producers would run far ahead; the backlog limit keeps each update's leftovers to at
    # most a batch plus one group per worker (2 samples a group)
    assert loops.groups_started <= (5 + 1) * (4 // 2 + 3)
    assert sum(r.dropped_stale for r in reports) <= 5 * 3 * 2


def test_resumed_loops_continue_the_group_numbers_and_versions():
    loops = _loops(workers=1, batch_size=2, max_staleness=1, version=7, next_group=40)
    reports = loops.run(updates=2)
    assert [r.version for r in reports] == [8, 9]
    assert reports[0].stats["batch"] == ["g40a", "g40b"] and loops.groups_started > 40


@pytest.mark.parametrize("produce_s", [0.0, 0.005])  # workers take their first groups as the trainer starts
def test_each_update_says_from_which_group_a_resume_must_start(produce_s):
    loops = _loops(produce_s=produce_s, workers=3, batch_size=3, max_staleness=100, next_group=10)
    reports = loops.run(updates=6)
    trained: set = set()
    for r in reports:
        trained |= set(r.stats["batch"])
        before = {f"g{n}{x}" for n in range(10, r.open_from) for x in "ab"}
        assert before <= trained  # nothing before open_from is left to train on
        assert not {f"g{r.open_from}a", f"g{r.open_from}b"} <= trained  # and open_from itself is not done
    assert reports[0].open_from in (10, 11)  # the first batch: 3 samples of groups of 2, in any order


@pytest.mark.slow
def test_several_judges_work_on_groups_at_once():
    loops = _loops(judge_s=0.2, workers=4, judges=3, batch_size=6, max_staleness=100)
    spans = []
    reports = loops.run(updates=3, on_judged=lambda t, counts: spans.append(counts["judged"]))
    overlapping = max(sum(a < s < b for a, b in spans) for s, _ in spans)
    assert overlapping >= 1  # one judge would never overlap itself
    assert all(r.samples == 6 for r in reports)
    used = [s for b in _batches(reports) for s in b]
    assert len(used) == len(set(used))


@pytest.mark.parametrize("where,error", [("produce", RuntimeError), ("judge", ValueError), ("update", KeyError)])
def test_an_error_in_any_loop_is_raised_and_every_actor_ends(where, error):
    loops = _loops(workers=2, batch_size=2, max_staleness=1, fail_in=where)
    with pytest.raises(error, match="broke"):
        loops.run(updates=50)
    assert _all_gone(loops)


def test_a_role_that_cannot_be_built_stops_the_run_at_once():
    roles = Roles(functools.partial(fake_roles.Rollout, broken_env=True), fake_roles.Judge, fake_roles.Trainer)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="a rollout actor could not start.*no Docker daemon here"):
        RayLoops(roles, workers=2, batch_size=2, max_staleness=1).run(updates=3)
    assert time.monotonic() - t0 < 60  # not restarted over and over


def test_groups_that_never_run_stop_the_run_before_it_trains_on_nothing_forever():
    # the daemon goes down at group 6: its groups give the judge nothing to score, so without the
    # guard the loops would draw groups forever; two rounds of both workers' groups stop them
    roles = Roles(functools.partial(fake_roles.Rollout, 0.05, daemon_down_from=6), fake_roles.Judge, fake_roles.Trainer)
    reports = []
    loops = RayLoops(roles, workers=2, batch_size=4, max_staleness=8, check_group=InfraStreak(4).see)
    with pytest.raises(InfrastructureDown, match=r"every one of the 8 episodes of the last 4 rollout groups "
                                                 r"\(up to group \d+\) failed on infrastructure \(8 of them: Docker"):
        loops.run(updates=1000, on_update=reports.append)
    assert len(reports) <= 3  # the 12 samples of groups 0-5 at most, then nothing more
    assert loops.groups_started < 16  # stopped on the 4th failed group, not after drawing many more
    assert _all_gone(loops)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="batch_size"):
        _loops(workers=1, batch_size=0, max_staleness=1)
    with pytest.raises(ValueError, match="judges >= 1"):
        _loops(workers=1, batch_size=2, max_staleness=1, judges=0)


def test_the_group_schedule_is_the_same_in_every_process():
    """A resumed run (a new process, another hash seed) must continue the same seeded schedule."""
    import os
    import subprocess
    import sys

    code = ("from trainers.async_roles import group_task; "
            "print([group_task(3, list(range(50)), n) for n in range(20)])")
    picks = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            cwd=ROOT, env=dict(os.environ, PYTHONHASHSEED=h)).stdout
             for h in ("1", "2")}
    assert len(picks) == 1 and len(set(eval(picks.pop()))) > 5


def test_a_trainer_starved_of_samples_says_why(capsys):
    """Groups that give no samples (e.g. no hint accepted) must not leave the run silent."""
    roles = Roles(functools.partial(fake_roles.Rollout, 0.01), functools.partial(fake_roles.Judge, empty=True),
                  fake_roles.Trainer)
    loops = RayLoops(roles, workers=1, batch_size=2, max_staleness=1, report_every_s=0.3)
    with pytest.raises(TimeoutError):
        _run_for(loops, 1.5)
    err = capsys.readouterr().err
    assert "[async] update 1 has waited" in err and "0/2 samples" in err and "gave 0" in err


def _run_for(loops, seconds):
    """Run until `seconds` pass (raises TimeoutError then, from inside the loop)."""
    deadline = time.monotonic() + seconds

    def judged(t, counts):
        if time.monotonic() > deadline:
            raise TimeoutError
    return loops.run(updates=1, on_judged=judged)


def _dying(tmp_path, die_at, times, **kw):
    roles = Roles(functools.partial(fake_roles.Rollout, 0.01), fake_roles.Judge,
                  functools.partial(fake_roles.DyingTrainer, checkpoint=str(tmp_path / "trainer.json"),
                                    die_at=die_at, times=times, markers=str(tmp_path)))
    return RayLoops(roles, **kw)


@pytest.mark.slow
def test_a_long_run_outlives_more_trainer_deaths_than_the_restart_budget(tmp_path):
    """`ray.max_restarts` bounds deaths in a row on the same work, not over a run (a proxy that runs
    for days is killed for memory now and then): four deaths, each on another update, with a budget
    of three, and every update is made once, from the last checkpoint."""
    loops = _dying(tmp_path, die_at=(2, 3, 4, 5), times=1, workers=2, batch_size=2, max_staleness=100,
                   placement=Placement(max_restarts=3))
    reports = loops.run(updates=6, on_update=lambda r: loops.save({"version": r.version}))
    assert [r.version for r in reports] == [1, 2, 3, 4, 5, 6]
    assert [r.restarts for r in reports] == [{}, *[{"trainer": 1}] * 4, {}]
    assert [r.stats["weights"] for r in reports] == [1, 2, 3, 4, 5, 6]
    used = [s for b in _batches(reports) for s in b]
    assert len(used) == len(set(used))


@pytest.mark.slow
def test_a_trainer_that_dies_on_every_try_of_an_update_stops_the_run_and_says_so(tmp_path):
    """An update that cannot be made (a batch that never fits in memory) must not loop for ever."""
    loops = _dying(tmp_path, die_at=(2,), times=100, workers=1, batch_size=2, max_staleness=100,
                   placement=Placement(max_restarts=2))
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=r"trainer actor died 3 times in a row.*memory"):
        loops.run(updates=4, on_update=lambda r: loops.save({"version": r.version}))
    assert len(list(tmp_path.glob("v2-*"))) == 3 and time.monotonic() - t0 < 120
    assert _all_gone(loops)


def ray_addresses() -> set[str]:
    """Every address a Ray process started by this test process listens on or talks to."""
    import psutil

    seen = set()
    for p in psutil.Process().children(recursive=True):
        try:
            for c in p.net_connections(kind="inet"):
                seen.add(c.laddr.ip)
                if c.raddr:
                    seen.add(c.raddr.ip)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return seen


LOOPBACK = {"127.0.0.1", "::ffff:127.0.0.1", "::1"}


def test_a_local_ray_listens_and_connects_on_loopback_only():
    loops = _loops(workers=2, batch_size=2, max_staleness=1)
    loops.run(updates=1)
    addresses = ray_addresses()
    assert addresses and addresses <= LOOPBACK, addresses - LOOPBACK
