"""A training sweep's comparison table (`python -m harness.compare <sweep_dir>`): one row per method
(aggregate.labels: the signal, and the judge, hints, teacher or mode where the sweep's runs differ in
them), the mean over seeds of success before and after and the judge's numbers, and the sweep's plot."""
from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

from rich.table import Table

from harness.reports.aggregate import Method, labels, mean, signal_rank
from harness.reports.console import console, rich_table
from harness.reports.plots import write_sweep_plot

# (column, metrics.json key, decimals)
COLUMNS = [("success before", "success_before", 3), ("success after", "success_after", 3), ("delta", "delta", 3),
           ("train samples", "train_samples", 1), ("mean step score", "mean_step_score", 3),
           ("judge votes", "judge_votes", 1), ("hints", "hints_accepted", 1),
           ("judge -1 precision", "judge_neg_precision", 3), ("judge -1 recall", "judge_neg_recall", 3),
           ("wall s", "wall_s", 0)]


def _fmt(x: float | None, nd: int) -> str:
    return "N/A" if x is None else f"{x:.{nd}f}"


def finished_runs(sweep_dir: Path) -> dict[Method, list[dict]]:
    """The metrics.json of every finished training run of the sweep, by method."""
    runs: dict[Method, list[dict]] = defaultdict(list)
    for f in sorted(Path(sweep_dir).glob("*/metrics.json")):
        m = json.loads(f.read_text())
        if "signal" in m and "success_after" in m:
            runs[Method.of_metrics(m)].append(m)
    return runs


def compare(sweep_dir: Path) -> Table:
    runs = finished_runs(sweep_dir)
    if not runs:
        raise SystemExit(f"{sweep_dir}: no finished training runs (*/metrics.json)")
    names = labels(runs)
    rows = [[names[method], str(len(ms)), *[_fmt(mean(m.get(key) for m in ms), nd) for _, key, nd in COLUMNS]]
            for method, ms in sorted(runs.items(), key=lambda kv: (signal_rank(kv[0].signal), names[kv[0]]))]
    return rich_table(f"signal comparison: {sweep_dir}", ["signal", "seeds", *[c for c, _, _ in COLUMNS]], rows)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m harness.compare <sweep_dir>", file=sys.stderr)
        return 1
    d = Path(argv[0])
    console().print(compare(d))
    print(f"plot: {write_sweep_plot(d)}")
    return 0
