"""`python -m harness.signal_report <sweep dir>...`: the signal comparison of training sweeps, per
(signal, feedback) and seed, with differences paired against outcome reward of the same seed.

Task success on a small test split moves in steps of 1/n and is often 0 for a small model, so next to
it this reads the test episodes' verifiable step labels (tool-call env: `well_formed`,
`executed_ok`, `matches_reference`) from each run's `eval_after.jsonl`: the share of test steps with
each label true, a denser view of what training changed. Writes `signal_comparison.csv`,
`signal_comparison.md` and `signal_comparison.png` next to the first sweep dir (or `--out`).

An input may also be a `signal_comparison.csv` written earlier: its runs join the new ones, so a grid
finished over several sessions (whose run dirs are gone) is reported as one. A (signal, feedback,
seed) given twice is an error, not a silent double count.
"""
from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

from harness.reports.aggregate import BASELINE_SIGNAL, Method, Stat, by_seed, mean, paired_deltas
from harness.reports.plots import paired_bars
from nextstate.atomic import write_text_atomic

LABELS = ("well_formed", "executed_ok", "matches_reference")
METRICS = ("success", *LABELS)
COLUMNS = ("signal", "feedback", "seed", *METRICS, "train_samples", "judge_votes", "hints_accepted", "cpu_s",
           "wall_s", "run_dir")


def label_rates(eval_file: Path) -> dict[str, float]:
    """Success rate and, per step label, the share of steps where it is true, over one eval file."""
    trajs = [json.loads(line) for line in eval_file.read_text().splitlines() if line.strip()]
    steps = [s.get("info", {}).get("step_label") or {} for t in trajs for s in t["steps"]]
    out = {"success": sum(bool(t["success"]) for t in trajs) / max(1, len(trajs))}
    for label in LABELS:
        known = [s[label] for s in steps if label in s]
        out[label] = sum(known) / len(known) if known else float("nan")
    return out


def _from_csv(path: Path) -> list[dict]:
    """Runs from an earlier report's `signal_comparison.csv`."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if rows and set(COLUMNS) - set(rows[0]):
        missing = sorted(set(COLUMNS) - set(rows[0]))
        raise SystemExit(f"error: {path} is not a signal_comparison.csv (missing {missing})")
    ints, floats = ("seed", "train_samples", "judge_votes", "hints_accepted"), (*METRICS, "cpu_s", "wall_s")
    return [{**r, **{k: int(r[k]) for k in ints},
             **{k: (float(r[k]) if r[k] not in ("", "None") else None) for k in floats}} for r in rows]


def _from_sweep(sweep: Path) -> tuple[list[dict], dict | None]:
    runs, before = [], None
    for metrics_file in sorted(sweep.glob("*/metrics.json")):
        run_dir = metrics_file.parent
        m = json.loads(metrics_file.read_text())
        if (run_dir / "eval_before.jsonl").exists() and before is None:
            before = label_rates(run_dir / "eval_before.jsonl")
        if not (run_dir / "eval_after.jsonl").exists():
            continue
        method = Method.of_metrics(m)
        if method.mode == "async":
            raise SystemExit(f"{run_dir}: a mode=async run; the signal comparison pairs synchronous runs only "
                             "(compare async runs with python -m harness.leaderboard)")
        runs.append({"signal": method.signal, "feedback": method.feedback, "seed": m["seed"],
                     "run_dir": str(run_dir), "train_samples": m["train_samples"], "cpu_s": m.get("cpu_s"),
                     "wall_s": m["wall_s"], "judge_votes": m["judge_votes"], "hints_accepted": m["hints_accepted"],
                     **label_rates(run_dir / "eval_after.jsonl")})
    return runs, before


def load_runs(inputs: list[Path]) -> tuple[list[dict], dict | None]:
    """Finished runs of sweep dirs and earlier CSVs, and the before-training rates (from the first
    sweep holding an `eval_before.jsonl`)."""
    found, before = [], None
    for source in map(Path, inputs):
        if not source.exists():
            raise SystemExit(f"error: {source}: no such sweep dir or signal_comparison.csv")
        runs, sweep_before = (_from_csv(source), None) if source.is_file() else _from_sweep(source)
        before = before or sweep_before
        found += runs

    def twice(key, seed, first, again):
        raise SystemExit(f"error: {(*key, seed)} appears twice: {first['run_dir']} and {again['run_dir']}")

    by_seed(found, key=_key, seed=lambda r: r["seed"], on_repeat=twice)
    return found, before


def _key(run: dict) -> tuple[str, str]:
    return run["signal"], run["feedback"]


def paired(runs: list[dict]) -> dict[tuple[str, str], dict[str, list[float]]]:
    """Per (signal, feedback): for each metric, run minus the outcome run of the same seed (seed order)."""
    groups = by_seed(runs, key=_key, seed=lambda r: r["seed"])
    out: dict[tuple[str, str], dict[str, list[float]]] = {}
    for metric in METRICS:
        values = {k: {s: r[metric] for s, r in seeds.items()} for k, seeds in groups.items()}
        for k, d in paired_deltas(values, is_baseline=lambda k: k[0] == BASELINE_SIGNAL).items():
            out.setdefault(k, {})[metric] = d
    return out


def _fmt(xs: list[float]) -> str:
    if not xs:
        return "N/A"
    if len(xs) == 1:
        return f"{xs[0]:+.3f} (1 seed)"
    st = Stat.of(xs)
    return f"{st.mean:+.3f} ± {st.half:.3f} ({', '.join(f'{x:+.2f}' for x in xs)})"


def _means_table(runs: list[dict]) -> list[str]:
    lines = ["| signal | feedback | seeds | " + " | ".join(f"{k} after" for k in METRICS) +
             " | train samples | CPU s / run |", "|" + "---|" * (len(METRICS) + 5)]
    for (sig, fb), seeds in sorted(by_seed(runs, key=_key, seed=lambda r: r["seed"]).items()):
        rs = list(seeds.values())
        cells = [f"{mean(r[k] for r in rs):.3f}" for k in METRICS]
        cpu = mean(r["cpu_s"] for r in rs)
        samples = mean(r["train_samples"] for r in rs)
        lines.append(f"| {sig} | {fb} | {len(rs)} | " + " | ".join(cells) +
                     f" | {samples:.1f} | {'N/A' if cpu is None else f'{cpu:.0f}'} |")
    return lines


def markdown(runs: list[dict], before: dict | None) -> str:
    lines = []
    if before:
        lines.append("Before training (the SFT checkpoint, greedy): " +
                     ", ".join(f"{k} {before[k]:.3f}" for k in METRICS) + "\n")
    lines += _means_table(runs)
    lines += ["", "Paired difference vs outcome (same seed): mean over seeds ± half-width of its 95% t-interval "
              "(per-seed values)", "",
              "| signal | feedback | " + " | ".join(f"Δ {k}" for k in METRICS) + " |",
              "|" + "---|" * (len(METRICS) + 2)]
    for (sig, fb), d in sorted(paired(runs).items()):
        lines.append(f"| {sig} | {fb} | " + " | ".join(_fmt(d[k]) for k in METRICS) + " |")
    total_cpu = sum(r["cpu_s"] or 0 for r in runs)
    lines += ["", f"{len(runs)} runs, {total_cpu / 60:.0f} CPU minutes in all (model servers included, Docker not)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.signal_report", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweeps", nargs="+", type=Path, help="sweep dirs and/or earlier signal_comparison.csv files")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    runs, before = load_runs(a.sweeps)
    if not runs:
        print(f"error: no finished training runs under {', '.join(map(str, a.sweeps))}")
        return 2
    out = a.out or a.sweeps[0].parent
    out.mkdir(parents=True, exist_ok=True)
    rows = [",".join(COLUMNS)] + [",".join(str(r[c]) for c in COLUMNS)
                                  for r in sorted(runs, key=lambda r: (r["signal"], r["feedback"], r["seed"]))]
    write_text_atomic(out / "signal_comparison.csv", "\n".join(rows) + "\n")
    md = markdown(runs, before)
    write_text_atomic(out / "signal_comparison.md", md)
    deltas = paired(runs)
    if deltas:
        paired_bars(deltas, ("success", "matches_reference"), out / "signal_comparison.png")
    print(md)
    return 0
