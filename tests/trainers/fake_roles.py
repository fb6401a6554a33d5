"""Stand-ins for the loops' roles (no model, no env): each built inside its Ray actor, as the real
ones are, and reporting what it did through its return values (actors share no memory with a test)."""
from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path


class Rollout:
    def __init__(self, produce_s=0.0, fail_at=None, broken_env=False, daemon_down_from=None):
        if broken_env:
            raise OSError("no Docker daemon here")
        self.produce_s, self.fail_at, self.daemon_down_from = produce_s, fail_at, daemon_down_from

    def produce(self, n, gate):
        if n == self.fail_at:
            raise RuntimeError("env broke")
        version = gate.wait_open()  # one "episode" per group here
        started = time.monotonic()
        time.sleep(self.produce_s)
        if self.daemon_down_from is not None:  # episodes; from that group on, as run_episode fails them
            from nextstate.types import Trajectory

            down = n >= self.daemon_down_from
            return version, [Trajectory(f"g{n}{k}", "terminal", infra_failure=down,
                                        infra_reason="Docker daemon is not reachable" if down else "")
                             for k in "ab"]
        return version, [(f"g{n}a", started), (f"g{n}b", started)]


    def node(self):
        import ray

        return ray.get_runtime_context().get_node_id()


class Judge:
    def __init__(self, judge_s=0.0, fail=False, empty=False):
        self.judge_s, self.fail, self.empty = judge_s, fail, empty

    def judge(self, n, group):
        if self.fail:
            raise ValueError("judge broke")
        t0 = time.monotonic()
        time.sleep(self.judge_s)
        # an episode gives a (name, started) sample; as for the real judge, one that never ran gives none
        samples = [(e.task_id, t0) if hasattr(e, "task_id") else e for e in group
                   if not getattr(e, "infra_failure", False)]
        return ([] if self.empty else samples), {"judged": (t0, time.monotonic())}


class Trainer:
    """Its "weights" are the number of updates made, kept in a checkpoint file when given one: a
    restarted trainer goes on from there."""

    def __init__(self, update_s=0.0, publish_s=0.0, fail=False, checkpoint: str | None = None):
        self.update_s, self.publish_s, self.fail = update_s, publish_s, fail
        self.checkpoint = Path(checkpoint) if checkpoint else None
        self.weights = json.loads(self.checkpoint.read_text())["weights"] if self.checkpoint and \
            self.checkpoint.exists() else 0
        self.published = 0

    def update(self, samples, version):
        if self.fail:
            raise KeyError("trainer broke")
        t0 = time.monotonic()
        time.sleep(self.update_s)
        self.weights += 1
        return {"loss": 0.5, "batch": [name for name, _ in samples], "started": [s for _, s in samples],
                "updating": (t0, time.monotonic()),
                "weights": self.weights, "published_before": self.published}

    def publish(self):
        time.sleep(self.publish_s)
        self.published += 1

    def save(self, state):
        if self.checkpoint:
            self.checkpoint.write_text(json.dumps({"weights": self.weights, **state}))


class MemoryHogTrainer(Trainer):
    """A trainer whose update `hog_at` grows its memory (touched pages, a little at a time) until
    something kills it, the first time only (a marker file says it was tried): Ray's memory monitor
    stands in for a batch that does not fit."""

    def __init__(self, *args, hog_at: int, hog_gb: float, marker: str, **kw):
        super().__init__(*args, **kw)
        self.hog_at, self.hog_gb, self.marker = hog_at, hog_gb, Path(marker)

    def update(self, samples, version):
        if version == self.hog_at and not self.marker.exists():
            self.marker.write_text("hogging")
            held = []
            for _ in range(int(self.hog_gb * 8)):
                held.append(bytearray(128 << 20))  # zero-filled: every page touched
                time.sleep(0.05)
            time.sleep(30)  # never reached where the monitor works: the test fails on the restarts count
        return super().update(samples, version)


class DyingTrainer(Trainer):
    """A trainer killed (SIGKILL, as Ray's memory monitor kills) at the start of the updates in
    `die_at`, `times` times each: a marker file per attempt survives the restart."""

    def __init__(self, *args, die_at: tuple[int, ...], times: int, markers: str, **kw):
        super().__init__(*args, **kw)
        self.die_at, self.times, self.markers = set(die_at), times, Path(markers)

    def update(self, samples, version):
        if version in self.die_at:
            tried = len(list(self.markers.glob(f"v{version}-*")))
            if tried < self.times:
                (self.markers / f"v{version}-{tried}").touch()
                os.kill(os.getpid(), signal.SIGKILL)
        return super().update(samples, version)
