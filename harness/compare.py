"""`python -m harness.compare <sweep_dir>`: the signal comparison table of a training sweep (one row
per signal: mean over seeds of success before/after and the judge's numbers) and its plot."""
from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from rich.table import Table

from harness.report import console
from harness.sweep_plot import run_label, write_sweep_plot


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


def _fmt(x, nd=3):
    return "N/A" if x is None else (f"{x:.{nd}f}" if isinstance(x, float) else str(x))


def compare(sweep_dir: Path) -> Table:
    runs = defaultdict(list)
    for f in sorted(Path(sweep_dir).glob("*/metrics.json")):
        m = json.loads(f.read_text())
        if "signal" in m and "success_after" in m:
            runs[run_label(m)].append(m)
    if not runs:
        raise SystemExit(f"{sweep_dir}: no finished training runs (*/metrics.json)")
    table = Table(title=f"signal comparison: {sweep_dir}")
    for c in ("signal", "seeds", "success before", "success after", "delta", "train samples",
              "mean step score", "judge votes", "hints", "judge -1 precision", "judge -1 recall", "wall s"):
        table.add_column(c)
    order = ["outcome", "prm", "opd", "prm_opd", "sft"]
    for sig in sorted(runs, key=lambda s: (order.index(s.split()[0]) if s.split()[0] in order else 99, s)):
        ms = runs[sig]
        table.add_row(sig, str(len(ms)), _fmt(_mean([m["success_before"] for m in ms])),
                      _fmt(_mean([m["success_after"] for m in ms])), _fmt(_mean([m["delta"] for m in ms])),
                      _fmt(_mean([m["train_samples"] for m in ms]), 1),
                      _fmt(_mean([m.get("mean_step_score") for m in ms])),
                      _fmt(_mean([m.get("judge_votes") for m in ms]), 1),
                      _fmt(_mean([m.get("hints_accepted") for m in ms]), 1),
                      _fmt(_mean([m.get("judge_neg_precision") for m in ms])),
                      _fmt(_mean([m.get("judge_neg_recall") for m in ms])),
                      _fmt(_mean([m["wall_s"] for m in ms]), 0))
    return table


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m harness.compare <sweep_dir>")
    d = Path(sys.argv[1])
    console().print(compare(d))
    print(f"plot: {write_sweep_plot(d)}")
