"""Seconds per training update, split by phase: the personal-agent experiment by default, or any
experiment (`--experiment general_toolcall`, the general-agent grids).

Runs `+experiment=personalization` (16 samples per update, <= 48 reply tokens) for a few updates with
the combined signal, once as a full fine-tune and once with LoRA, and reads each iteration's phases
from the run's `train_log.jsonl`: rollout (16 sampled replies), judge (votes), hints, teacher scoring
(OPD), the PPO update, the weight push to the server, and the rest (checkpoint, bookkeeping). The first
update is left out of the medians (it pays for warm-up). The last line is the JSON summary; the goal
is <= 60 s per update for the 135M model on this 2-core machine.

    python benchmarks/chat_update.py                      # oracle judge, 4 updates each
    python benchmarks/chat_update.py judge=model hints=model --updates 3
    python benchmarks/chat_update.py --experiment general_toolcall     # needs its SFT start (make general)
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PHASES = ("rollout_s", "judge_s", "hints_s", "teacher_s", "update_s", "publish_s")


def run(experiment: str, updates: int, overrides: list[str], out: Path) -> list[dict]:
    args = [sys.executable, "-m", "harness.run", f"+experiment={experiment}", f"mode.iterations={updates}",
            "mode.eval_every=0", "mode.eval_limit=1", "progress=false", f"hydra.run.dir={out}", *overrides]
    p = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    return [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines() if line.strip()]


def phases(log: list[dict]) -> dict[str, float]:
    """Median seconds of each phase over the updates after the first, and of the whole update."""
    rows = log[1:] or log
    totals = [b["elapsed_s"] - a["elapsed_s"] for a, b in zip(log, log[1:])] or [log[0]["elapsed_s"]]
    out = {k: round(statistics.median(r.get(k, 0.0) for r in rows), 2) for k in PHASES}
    out["total_s"] = round(statistics.median(totals), 2)
    out["other_s"] = round(out["total_s"] - sum(out[k] for k in PHASES), 2)
    out["samples"] = round(statistics.median(r["samples"] for r in rows), 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--updates", type=int, default=4)
    ap.add_argument("--experiment", default="personalization")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides for both runs (e.g. judge=model hints=model)")
    args = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="chat_update.") as tmp:
        for name, extra in (("full", ["mode.lora=false"]), ("lora", ["mode.lora=true", "mode.lr=1e-4"])):
            results[name] = phases(run(args.experiment, args.updates, [*args.overrides, *extra], Path(tmp) / name))
            print(f"{name:5s} " + "  ".join(f"{k} {v}" for k, v in results[name].items()), flush=True)
    best = min(results, key=lambda k: results[k]["total_s"])
    metric = "chat_update" if args.experiment == "personalization" else f"{args.experiment}_update"
    print(json.dumps({"metric": f"{metric}_seconds_per_update", "value": results[best]["total_s"],
                      "target": 60.0, "higher_is_better": False, "best": best,
                      "full_vs_lora": round(results["full"]["total_s"] / results["lora"]["total_s"], 3),
                      **{f"{k}_{p}": v for k, r in results.items() for p, v in r.items()},
                      "overrides": args.overrides}))


if __name__ == "__main__":
    main()
