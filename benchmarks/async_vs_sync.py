"""Training throughput of `mode=async` against `mode=train` on the same env, signal, model and budget,
in one run: trained samples per second of the training loop (evaluation and start-up excluded), read
from each run's train_log.jsonl (`elapsed_s` at its last update).

Both runs: the chat env (no Docker), OPD with `hints=next_state` (every step is a sample, no judge
model), the current policy as teacher, temperature 1. The sync run rolls out `TASKS x GROUP` episodes
per iteration, then updates on all their samples; the async run keeps `parallel` rollout workers busy
while it updates on every BATCH samples, dropping samples more than one version old. On a 2-core
machine the loops compete for the same cores, so this measures how much overlap survives that, not
the paper's multi-GPU speed-up. Ends with one JSON line.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ITERATIONS, TASKS, GROUP, BATCH, PARALLEL = 3, 2, 2, 6, 2
COMMON = ["env=chat", "signal=opd", "hints=next_state", "mode.teacher=policy", "seed=0", "split=all",
          "progress=false", f"parallel={PARALLEL}", f"mode.group_size={GROUP}", "mode.eval_limit=1",
          "env.max_steps=2", "model.max_new_tokens=32", f"mode.iterations={ITERATIONS}"]


def run(tmp: Path, name: str, *extra: str) -> list[dict]:
    out = tmp / name
    env = dict(os.environ, NEXTSTATE_RESULTS=str(tmp))
    p = subprocess.run([sys.executable, "-m", "harness.run", *COMMON, *extra, f"hydra.run.dir={out}"], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        raise SystemExit(f"{name} run failed:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    return [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        sync = run(tmp, "sync", "mode=train", f"mode.tasks_per_iter={TASKS}")
        asyn = run(tmp, "async", "mode=async", f"mode.batch_samples={BATCH}")
    rate = {}
    for name, log in (("sync", sync), ("async", asyn)):
        samples, elapsed = sum(x["samples"] for x in log), log[-1]["elapsed_s"]
        episodes = sum(x["episodes"] for x in log)
        rate[name] = samples / elapsed
        print(f"{name:5s}: {samples} samples trained in {elapsed:.1f} s ({rate[name]:.3f}/s), "
              f"{episodes} episodes rolled out")
    dropped = sum(x["dropped_stale"] for x in asyn)
    waited = sum(x["trainer_wait_s"] for x in asyn)
    print(f"async: {dropped} stale samples dropped; the trainer waited {waited:.1f} s for samples in all")
    print(json.dumps({"metric": "async_vs_sync_trained_samples_per_s", "value": round(rate["async"] / rate["sync"], 3),
                      "higher_is_better": True, "sync_samples_per_s": round(rate["sync"], 4),
                      "async_samples_per_s": round(rate["async"], 4), "async_dropped_stale": dropped,
                      "async_trainer_wait_s": round(waited, 1), "iterations": ITERATIONS}))


if __name__ == "__main__":
    main()
