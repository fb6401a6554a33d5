"""The async mode's loops with real threads and plain functions in place of the model: batches are
full, staleness is bounded, workers are held during a weight swap, errors surface and no thread is
left running."""
import threading
import time

import pytest

from tests.paths import ROOT
from trainers.async_loops import AsyncLoops, Gate, Stopped, Tagged, fresh


def _threads_left():
    return [t.name for t in threading.enumerate() if t.name.startswith(("rollout-", "judge"))]


def test_fresh_keeps_samples_within_the_staleness_bound():
    pending = [Tagged(v, i, f"s{i}") for i, v in enumerate([0, 1, 2, 3, 3])]
    kept, dropped = fresh(pending, version=3, max_staleness=1)
    assert [t.item for t in kept] == ["s2", "s3", "s4"] and dropped == 2
    kept, dropped = fresh(pending, version=3, max_staleness=0)
    assert [t.item for t in kept] == ["s3", "s4"] and dropped == 3
    assert fresh([], 5, 0) == ([], 0)


def test_gate_holds_workers_during_a_swap_and_stops_them():
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


def _loops(update_s=0.0, produce_s=0.0, publish_s=0.0, *, judge_s=0.0, fail_in=None, **kw):
    log = {"updates": [], "produced": [], "started_at": [], "updating": [], "judging": 0, "most_judging": 0}
    judging = threading.Lock()

    def produce(n, gate):
        if fail_in == "produce" and n == 3:
            raise RuntimeError("env broke")
        version = gate.wait_open()  # one "episode" per group here
        time.sleep(produce_s)
        log["produced"].append((n, version))
        log["started_at"].append(time.monotonic())
        return version, [f"g{n}a", f"g{n}b"]

    def judge(n, group):
        if fail_in == "judge":
            raise ValueError("judge broke")
        with judging:
            log["judging"] += 1
            log["most_judging"] = max(log["most_judging"], log["judging"])
        time.sleep(judge_s)
        with judging:
            log["judging"] -= 1
        return group

    def update(samples):
        if fail_in == "update":
            raise KeyError("trainer broke")
        t0 = time.monotonic()
        time.sleep(update_s)
        log["updates"].append(list(samples))
        log["updating"].append((t0, time.monotonic()))
        return {"loss": 0.5}

    def publish():
        time.sleep(publish_s)
        log["published"] += 1

    log["published"] = 0
    return AsyncLoops(produce=produce, judge=judge, update=update, publish=publish, **kw), log


def test_loops_make_full_batches_of_fresh_samples():
    loops, log = _loops(update_s=0.05, workers=3, batch_size=4, max_staleness=1)
    reports = loops.run(updates=5)
    assert [r.version for r in reports] == [1, 2, 3, 4, 5] and loops.gate.version == 5
    assert all(r.samples == 4 and len(u) == 4 for r, u in zip(reports, log["updates"]))
    assert all(s <= 1 for r in reports for s in r.staleness)
    assert all(r.stats == {"loss": 0.5} for r in reports)
    used = [s for u in log["updates"] for s in u]
    assert len(used) == len(set(used))  # no sample trains twice
    assert _threads_left() == []


def test_with_no_staleness_allowed_samples_rolled_out_during_an_update_are_dropped():
    loops, log = _loops(update_s=0.15, produce_s=0.01, workers=2, batch_size=2, max_staleness=0)
    reports = loops.run(updates=4)
    assert all(s == 0 for r in reports for s in r.staleness)
    assert sum(r.dropped_stale for r in reports) > 0
    assert _threads_left() == []


def test_workers_are_held_while_the_weights_are_swapped():
    loops, log = _loops(publish_s=0.2, produce_s=0.01, workers=2, batch_size=40, max_staleness=1)
    loops.run(updates=2)
    assert log["published"] == 2
    assert loops.gate.waited_s > 0.1


def test_rollouts_stay_about_one_batch_ahead_of_a_slow_trainer():
    loops, log = _loops(update_s=0.1, workers=3, batch_size=4, max_staleness=1, queue_groups=1000)
    reports = loops.run(updates=5)
    # without the backlog limit, instant producers would fill any queue; with it, each update leaves at
    # most a batch plus one group per worker behind (2 samples a group)
    assert len(log["produced"]) <= (5 + 1) * (4 // 2 + 3)
    assert sum(r.dropped_stale for r in reports) <= 5 * 3 * 2


def test_rollouts_go_on_while_the_trainer_updates():
    loops, log = _loops(update_s=0.3, produce_s=0.01, workers=2, batch_size=8, max_staleness=1)
    loops.run(updates=2)
    during = [t for t in log["started_at"] for a, b in log["updating"] if a < t < b]
    assert len(during) >= 4  # while the trainer updates, the next batch is being rolled out


def test_resumed_loops_continue_the_group_numbers_and_versions():
    loops, log = _loops(workers=1, batch_size=2, max_staleness=1, version=7, next_group=40)
    reports = loops.run(updates=2)
    assert [r.version for r in reports] == [8, 9]
    assert min(n for n, _ in log["produced"]) == 40 and loops.groups_started > 40


@pytest.mark.parametrize("produce_s", [0.0, 0.005])  # workers take their first groups as the trainer starts
def test_each_update_says_from_which_group_a_resume_must_start(produce_s):
    loops, log = _loops(produce_s=produce_s, workers=3, batch_size=3, max_staleness=100, next_group=10)
    reports = loops.run(updates=6)
    trained: set = set()
    for r, batch in zip(reports, log["updates"]):
        trained |= set(batch)
        before = {f"g{n}{x}" for n in range(10, r.open_from) for x in "ab"}
        assert before <= trained  # nothing before open_from is left to train on
        assert not {f"g{r.open_from}a", f"g{r.open_from}b"} <= trained  # and open_from itself is not done
    assert reports[0].open_from in (10, 11)  # the first batch: 3 samples of groups of 2, in any order


def test_several_judges_work_on_groups_at_once():
    loops, log = _loops(judge_s=0.05, workers=4, judges=3, batch_size=6, max_staleness=100)
    reports = loops.run(updates=3)
    assert log["most_judging"] >= 2  # one judge thread would never overlap itself
    assert all(r.samples == 6 for r in reports) and _threads_left() == []
    used = [s for u in log["updates"] for s in u]
    assert len(used) == len(set(used))


@pytest.mark.parametrize("where,error", [("produce", RuntimeError), ("judge", ValueError), ("update", KeyError)])
def test_an_error_in_any_loop_is_raised_and_every_thread_ends(where, error):
    loops, _ = _loops(workers=2, batch_size=2, max_staleness=1, fail_in=where)
    with pytest.raises(error):
        loops.run(updates=50)
    assert _threads_left() == []


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

    code = ("from types import SimpleNamespace as N; from trainers.async_train import group_task; "
            "tr = N(cfg=N(seed=3), train_tasks=list(range(50))); print([group_task(tr, n) for n in range(20)])")
    picks = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            cwd=ROOT, env=dict(os.environ, PYTHONHASHSEED=h)).stdout
             for h in ("1", "2")}
    assert len(picks) == 1 and len(set(eval(picks.pop()))) > 5


def test_a_trainer_starved_of_samples_says_why(capsys):
    """Groups that give no samples (e.g. no hint accepted) must not leave the run silent."""
    stop_after = time.monotonic() + 0.6

    def produce(n, gate):
        gate.wait_open()
        time.sleep(0.01)
        return gate.version, []

    def judge(n, group):
        if time.monotonic() > stop_after:
            raise RuntimeError("enough")
        return []

    loops = AsyncLoops(produce=produce, judge=judge, update=lambda s: {}, publish=lambda: None, workers=1,
                       batch_size=2, max_staleness=1, report_every_s=0.2)
    with pytest.raises(RuntimeError, match="enough"):
        loops.run(updates=1)
    err = capsys.readouterr().err
    assert "[async] update 1 has waited" in err and "0/2 samples" in err and "gave 0" in err
