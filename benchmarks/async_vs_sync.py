"""Training throughput of `mode=async` (the Ray loops) against `mode=train` on the same env, signal,
model and budget, in one run: trained samples per second of the training loop (evaluation and
start-up excluded, read from each run's train_log.jsonl) and the trainer's idle share (the part of
the loop's time the trainer is not updating), for sync, async with 1 rollout worker and with 2; plus
the Ray overhead per group (the loops with instant stand-in roles).

All runs: the chat env (no Docker), OPD with `hints=next_state` (every step is a sample, no judge
model), the current policy as teacher, temperature 1. On a 2-core machine serving, rollouts and the
trainer compete for the same cores, so async cannot beat sync here; the design target (>= 1.5x sync
where serving and training have their own devices) is argued from the sync run's measured phase
times with a two-stage pipeline model: serving (rollouts + judging) and training (update + publish)
overlap, so a sample costs max(serve, train) instead of serve + train. Ends with one JSON line.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
ITERATIONS, TASKS, GROUP, BATCH = 3, 2, 2, 6
COMMON = ["env=chat", "signal=opd", "hints=next_state", "mode.teacher=policy", "seed=0", "split=all",
          "progress=false", "parallel=2", f"mode.group_size={GROUP}", "mode.eval_limit=1",
          "env.max_steps=2", "model.max_new_tokens=32", f"mode.iterations={ITERATIONS}"]


def run(tmp: Path, name: str, *extra: str) -> list[dict]:
    out = tmp / name
    env = dict(os.environ, NEXTSTATE_RESULTS=str(tmp))
    p = subprocess.run([sys.executable, "-m", "harness.run", *COMMON, *extra, f"hydra.run.dir={out}"], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        raise SystemExit(f"{name} run failed:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    return [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]


class _Instant:
    """A stand-in for every role: no work, so the loops' time is Ray's own."""

    def produce(self, n, gate):
        return gate.wait_open(), [n]

    def judge(self, n, group):
        return list(group), None

    def update(self, samples, version):
        return {}

    def publish(self):
        pass

    def save(self, state):
        pass


def ray_overhead_per_group(groups: int = 200) -> float:
    """Seconds of scheduling, transfer and gate calls per group (one sample each, batches of 10),
    between the first update and the last (the actors' start-up left out)."""
    from trainers.ray_loops import RayLoops, Roles
    from trainers.ray_runtime import RayConfig, ray_session

    stamps = []
    with ray_session(RayConfig(address=None)):
        loops = RayLoops(Roles(_Instant, _Instant, _Instant), workers=2, batch_size=10, max_staleness=100)
        loops.run(updates=groups // 10, on_update=lambda r: stamps.append(time.monotonic()))
    return (stamps[-1] - stamps[0]) / (groups - 10)


def summary(log: list[dict]) -> dict:
    samples, elapsed = sum(x["samples"] for x in log), log[-1]["elapsed_s"]
    updating = sum(x["update_s"] for x in log)
    return {"samples": samples, "elapsed_s": elapsed, "samples_per_s": samples / elapsed,
            "trainer_idle_share": 1 - updating / elapsed, "episodes": sum(x["episodes"] for x in log)}


def main() -> None:
    overhead = ray_overhead_per_group()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        logs = {"sync": run(tmp, "sync", "mode=train", f"mode.tasks_per_iter={TASKS}"),
                "async_1": run(tmp, "async_1", "mode=async", f"mode.batch_samples={BATCH}", "mode.rollout_workers=1"),
                "async_2": run(tmp, "async_2", "mode=async", f"mode.batch_samples={BATCH}", "mode.rollout_workers=2")}
    s = {name: summary(log) for name, log in logs.items()}
    for name, x in s.items():
        print(f"{name:8s}: {x['samples']} samples trained in {x['elapsed_s']:.1f} s ({x['samples_per_s']:.3f}/s), "
              f"trainer idle {x['trainer_idle_share']:.0%}, {x['episodes']} episodes rolled out")
    sync = logs["sync"]
    per_sample = {k: sum(x[k] for x in sync) / s["sync"]["samples"]
                  for k in ("rollout_s", "signal_s", "update_s", "publish_s")}
    serve, train = per_sample["rollout_s"] + per_sample["signal_s"], per_sample["update_s"] + per_sample["publish_s"]
    modelled = (serve + train) / max(serve, train)
    print(f"sync phases per sample: serve {serve:.2f} s (rollout + judge), train {train:.2f} s (update + publish); "
          f"on separate devices async costs max() instead of the sum: {modelled:.2f}x sync")
    print(f"ray overhead: {overhead * 1000:.1f} ms per group")
    print(json.dumps({"metric": "async_vs_sync_trained_samples_per_s",
                      "value": round(s["async_2"]["samples_per_s"] / s["sync"]["samples_per_s"], 3),
                      "target": 1.5, "higher_is_better": True,
                      "async_1_vs_sync": round(s["async_1"]["samples_per_s"] / s["sync"]["samples_per_s"], 3),
                      **{f"{k}_samples_per_s": round(x["samples_per_s"], 4) for k, x in s.items()},
                      **{f"{k}_trainer_idle_share": round(x["trainer_idle_share"], 3) for k, x in s.items()},
                      "modelled_speedup_separate_devices": round(modelled, 2),
                      "ray_overhead_ms_per_group": round(overhead * 1000, 2), "iterations": ITERATIONS}))


if __name__ == "__main__":
    main()
