"""Stand-ins for the loops' roles (no model, no env): each built inside its Ray actor, as the real
ones are, and reporting what it did through its return values (actors share no memory with a test)."""
from __future__ import annotations

import json
import time
from pathlib import Path


class Rollout:
    def __init__(self, produce_s=0.0, fail_at=None, broken_env=False):
        if broken_env:
            raise OSError("no Docker daemon here")
        self.produce_s, self.fail_at = produce_s, fail_at

    def produce(self, n, gate):
        if n == self.fail_at:
            raise RuntimeError("env broke")
        version = gate.wait_open()  # one "episode" per group here
        started = time.monotonic()
        time.sleep(self.produce_s)
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
        return ([] if self.empty else list(group)), {"judged": (t0, time.monotonic())}


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
