"""A sweep's comparison table (`python -m harness.compare <sweep_dir>`). Training runs: one row per
method (aggregate.labels: the signal, and the judge, hints, teacher or mode where the sweep's runs differ
in them), the mean over seeds of success before and after and the judge's numbers, and the sweep's
plot. Eval runs: one row per env, suite, agent and model, the mean success over seeds."""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from rich.table import Table

from harness.reports.aggregate import Method, labels, mean, signal_rank
from harness.reports.console import console, rich_table
from harness.reports.plots import write_sweep_plot
from nextstate.leaderboard import MARK

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


def eval_runs(sweep_dir: Path) -> dict[tuple, list[dict]]:
    """The leaderboard rows of the sweep's finished eval runs, by (env, suite, agent, model)."""
    runs: dict[tuple, list[dict]] = defaultdict(list)
    for f in sorted(Path(sweep_dir).glob("*/metrics.json")):
        row = json.loads(f.read_text()).get(MARK, {}).get("row")
        if row and "success_after" not in json.loads(f.read_text()):
            runs[(row["env"], row.get("suite", "-"), row["agent"], row.get("model", "-"))].append(row)
    return runs


def compare_evals(sweep_dir: Path, runs: dict[tuple, list[dict]]) -> Table:
    rows = [[*key, str(len(rs)), _fmt(mean(float(r["success_rate"]) for r in rs), 3),
             _fmt(mean(float(r["infra_failures"]) for r in rs), 1)] for key, rs in sorted(runs.items())]
    return rich_table(f"eval runs: {sweep_dir}", ["env", "suite", "agent", "model", "seeds", "success", "infra"],
                      rows)


def compare(sweep_dir: Path) -> Table:
    if not Path(sweep_dir).is_dir():
        raise SystemExit(f"{sweep_dir}: no such sweep dir")
    runs = finished_runs(sweep_dir)
    if not runs:
        evals = eval_runs(sweep_dir)
        if evals:
            return compare_evals(sweep_dir, evals)
        raise SystemExit(f"{sweep_dir}: no finished runs (no <job>/metrics.json)")
    names = labels(runs)
    rows = [[names[method], str(len(ms)), *[_fmt(mean(m.get(key) for m in ms), nd) for _, key, nd in COLUMNS]]
            for method, ms in sorted(runs.items(), key=lambda kv: (signal_rank(kv[0].signal), names[kv[0]]))]
    return rich_table(f"signal comparison: {sweep_dir}", ["signal", "seeds", *[c for c, _, _ in COLUMNS]], rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.compare", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweep_dir", type=Path, help="a Hydra multirun dir (training or eval runs)")
    d = ap.parse_args(argv).sweep_dir
    table = compare(d)
    console().print(table)
    if finished_runs(d):
        print(f"plot: {write_sweep_plot(d)}")
    return 0
