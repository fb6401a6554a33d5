"""`python -m harness.general <sweep dir or scores.csv>... --out results/general`: the general-agent
signal comparison (terminal, GUI, tool-call), shaped like the personal-agent report.

Every evaluation of every training run on a general-agent env becomes a row of `scores.csv` (env,
suite, signal, judge, seed, updates, score): the share of the env's held-out instances solved by the
greedy policy after that many updates. From those rows alone come `table.md` (per env, signal and
judge: the score at 0, 8 and 16 updates, mean ± 95% CI over seeds, and the Δ paired by seed against
outcome reward; the paper's claim, outcome + process reward beats outcome alone, is the `prm` row's
Δ) and `curves.png` (one panel per env).
"""
from __future__ import annotations

import argparse
import csv
from pathlib import Path

from harness.reports.aggregate import by_seed
from harness.reports.personalization import _csv, _points, _run_dirs, feedback_of, signal_name, table
from harness.reports.plots import score_curves
from nextstate.atomic import write_text_atomic

COLUMNS = ("env", "suite", "signal", "judge", "seed", "updates", "score", "run_dir")
_SCORE_COLUMNS = set(COLUMNS) - {"run_dir"}


def run_scores(run_dir: Path) -> list[dict]:
    """(updates, score) of every evaluation a general-agent training run has made so far."""
    import yaml

    cfg_file = run_dir / ".hydra" / "config.yaml"
    if not cfg_file.exists():
        return []
    cfg = yaml.safe_load(cfg_file.read_text())
    env = cfg.get("env") or {}
    if env.get("name") in (None, "chat") or (cfg.get("mode") or {}).get("name") != "train":
        return []
    base = {"env": env["name"], "suite": env.get("suite", "-"), "signal": signal_name(cfg),
            "judge": feedback_of(cfg), "seed": cfg["seed"], "run_dir": str(run_dir)}
    return [{**base, "updates": u, "score": round(s, 4)} for u, s in sorted(_points(run_dir).items())
            if s is not None]


def _read(path: Path) -> list[dict]:
    if path.is_file():
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            if not _SCORE_COLUMNS <= set(reader.fieldnames or ()):
                raise SystemExit(f"error: {path} is not a general scores.csv (it needs {sorted(_SCORE_COLUMNS)})")
            return [{**r, "seed": int(r["seed"]), "updates": int(r["updates"]), "score": float(r["score"])}
                    for r in reader]
    if path.is_dir():
        return [r for d in _run_dirs(path) for r in run_scores(d)]
    raise SystemExit(f"error: {path} is neither a run dir, a sweep dir nor a scores.csv")


def collect(inputs: list[Path]) -> list[dict]:
    """Rows from run or sweep dirs and earlier scores.csv files; one evaluation seen twice is an error."""
    rows = [r for path in inputs for r in _read(path)]

    def twice(key, seed, first, again):
        raise SystemExit(f"error: {(*key[:4], seed, key[4])} is in both {first['run_dir']} and {again['run_dir']}")

    by_seed(rows, key=lambda r: (r["env"], r["suite"], r["signal"], r["judge"], r["updates"]),
            seed=lambda r: r["seed"], on_repeat=twice)
    return rows


def write(rows: list[dict], out: Path) -> str:
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "scores.csv", _csv(rows, COLUMNS, COLUMNS[:6]))
    md = table(rows, setting="env")
    write_text_atomic(out / "table.md", md)
    score_curves(rows, out / "curves.png", setting="env", ylabel="held-out success (greedy)")
    return md


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.general", description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", type=Path, help="run dirs, sweep dirs and/or earlier scores.csv files")
    ap.add_argument("--out", type=Path, default=Path("results/general"))
    args = ap.parse_args(argv)
    rows = collect(args.inputs)
    if not rows:
        raise SystemExit(f"error: no general-agent training runs with an evaluation in {[str(p) for p in args.inputs]}")
    print(write(rows, args.out))
    print(f"[general] {len(rows)} scores -> {args.out}/scores.csv, table.md, curves.png")
    return 0
