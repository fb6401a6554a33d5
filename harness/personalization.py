"""`python -m harness.personalization <sweep dir>... --out results/personalization`: the personal-agent
experiment's results (issue 19), shaped like the paper's table.

Every evaluation of every finished or running training run on a persona (`env.persona`) becomes a
row of `scores.csv` (persona, signal, judge, seed, updates, score, ...): the held-out score after that
many updates, the share of test requests whose first greedy reply met every preference. From those
rows alone (so the table can be recomputed) come `table.md`: the score at 8 and 16 updates per signal
and judge, mean ± 95% CI over seeds and the paired Δ against outcome reward of the same seed; and
`curves.png`: the mean score against updates, one line per (signal, judge).

`judge` is the feedback a run learned from: `oracle` (the user's own verdict, and their complaint as the
hint), `model` (the policy's initial checkpoint as the judge and hint extractor) or `-` (outcome reward,
which reads no judge: its runs are the baseline of both arms).
"""
from __future__ import annotations

import argparse
import csv
import io
import json
from collections import defaultdict
from pathlib import Path

from harness.leaderboard_report import Stat
from nextstate.atomic import save_figure_atomic, write_text_atomic

COLUMNS = ("persona", "signal", "judge", "seed", "updates", "score", "run_dir")
SIGNALS = ("outcome", "prm", "opd", "prm_opd")


def feedback_of(cfg: dict) -> str:
    """Which feedback a run learned from, read from its composed config."""
    sig, judge, hints = cfg["signal"], cfg["judge"]["name"], cfg["hints"]["name"]
    used = ([judge] if sig["use_prm"] else []) + ([hints] if sig["use_opd"] else [])
    if not used:
        return "-"
    return "model" if "model" in used else "oracle"


def signal_name(cfg: dict) -> str:
    sig = cfg["signal"]
    return sig["name"] + (f"+top{sig['opd_topk']}" if sig["use_opd"] and sig.get("opd_topk") else "")


def run_scores(run_dir: Path) -> list[dict]:
    """(updates, score) of every evaluation a persona training run has made so far."""
    import yaml

    cfg_file = run_dir / ".hydra" / "config.yaml"
    if not cfg_file.exists():
        return []
    cfg = yaml.safe_load(cfg_file.read_text())
    persona = (cfg.get("env") or {}).get("persona")
    if not persona or (cfg.get("mode") or {}).get("name") != "train":
        return []
    base = {"persona": persona, "signal": signal_name(cfg), "judge": feedback_of(cfg), "seed": cfg["seed"],
            "run_dir": str(run_dir)}
    points: dict[int, float] = {}
    metrics_file = run_dir / "metrics.json"
    if metrics_file.exists():
        m = json.loads(metrics_file.read_text())
        points[0], points[m["iterations"]] = m["success_before"], m["success_after"]
        log = m.get("train_log", [])
    else:
        log_file = run_dir / "train_log.jsonl"
        log = [json.loads(x) for x in log_file.read_text().splitlines() if x.strip()] if log_file.exists() else []
        state = run_dir / "checkpoint" / "state.json"
        if state.exists():
            points[0] = json.loads(state.read_text())["success_before"]
    for entry in log:
        if "eval_success" in entry:
            points[entry["iteration"] + 1] = entry["eval_success"]
    return [{**base, "updates": u, "score": round(s, 4)} for u, s in sorted(points.items()) if s is not None]


def collect(inputs: list[Path]) -> list[dict]:
    """Rows from sweep dirs (each run a sub dir) and from earlier `scores.csv` files; a (persona,
    signal, judge, seed, updates) seen twice is an error, not a silent double count."""
    rows, seen = [], {}
    for path in inputs:
        if path.is_file():
            with open(path, newline="") as f:
                found = [{**r, "seed": int(r["seed"]), "updates": int(r["updates"]), "score": float(r["score"])}
                         for r in csv.DictReader(f)]
        elif path.is_dir():
            found = [r for d in sorted(p.parent.parent for p in path.glob("*/.hydra/config.yaml"))
                     for r in run_scores(d)]
        else:
            raise SystemExit(f"error: {path} is neither a sweep dir nor a scores.csv")
        for r in found:
            key = tuple(r[k] for k in COLUMNS[:5])
            if key in seen:
                raise SystemExit(f"error: {key} is in both {seen[key]} and {r['run_dir']}")
            seen[key] = r["run_dir"]
            rows.append(r)
    return rows


def _by(rows: list[dict], updates: int) -> dict[tuple[str, str, str], dict[int, float]]:
    out: dict[tuple[str, str, str], dict[int, float]] = defaultdict(dict)
    for r in rows:
        if r["updates"] == updates:
            out[(r["persona"], r["signal"], r["judge"])][r["seed"]] = r["score"]
    return out


def _fmt(stat: Stat | None) -> str:
    if stat is None:
        return "-"
    return f"{stat.mean:.2f}" + (f" ± {stat.half:.2f}" if stat.half is not None else "") + f" (n={stat.n})"


def table(rows: list[dict], at: tuple[int, ...] | None = None) -> str:
    """Markdown: per persona, signal and judge, the score before training and at `at` updates
    (mean ± 95% CI over seeds), and the paired Δ against outcome reward of the same seed. By default
    the paper's columns, 8 and 16 updates, where runs reached them (else the furthest they reached)."""
    reached = {r["updates"] for r in rows}
    at = at or tuple(u for u in (8, 16) if u in reached) or (max(reached),)
    start = _by(rows, 0)
    cols = [f"score @{u}" for u in at] + [f"Δ vs outcome @{u}" for u in at]
    out = io.StringIO()
    out.write("| persona | signal | judge | seeds | score @0 | " + " | ".join(cols) + " |\n")
    out.write("|" + "---|" * (5 + len(cols)) + "\n")
    keys = sorted({k for u in (0, *at) for k in _by(rows, u)},
                  key=lambda k: (k[0], k[2] != "-", k[2], SIGNALS.index(k[1].split("+")[0]) if k[1].split("+")[0]
                                 in SIGNALS else 9, k[1]))
    for key in keys:
        persona, signal, judge = key
        cells, deltas = [], []
        for u in at:
            mine = _by(rows, u).get(key, {})
            cells.append(_fmt(Stat.of(list(mine.values())) if mine else None))
            base = _by(rows, u).get((persona, "outcome", "-"), {})
            pairs = [mine[s] - base[s] for s in mine if s in base]
            deltas.append(_fmt(Stat.of(pairs)) if pairs and signal != "outcome" else "-")
        s0 = start.get(key, {})
        seeds = len({r["seed"] for r in rows if (r["persona"], r["signal"], r["judge"]) == key})
        out.write(f"| {persona} | {signal} | {judge} | {seeds} | {_fmt(Stat.of(list(s0.values())) if s0 else None)} | "
                  + " | ".join(cells + deltas) + " |\n")
    return out.getvalue()


def plot(rows: list[dict], path: Path) -> Path:
    """Mean held-out score against updates, one line per (signal, judge), a panel per persona; the
    band spans the seeds' lowest and highest score."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    personas = sorted({r["persona"] for r in rows})
    fig, axes = plt.subplots(1, len(personas), figsize=(5.5 * len(personas), 4), squeeze=False)
    for ax, persona in zip(axes[0], personas):
        lines: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
        for r in rows:
            if r["persona"] == persona:
                lines[(r["signal"], r["judge"])][r["updates"]].append(r["score"])
        for (signal, judge), pts in sorted(lines.items()):
            xs = sorted(pts)
            mean = [sum(pts[x]) / len(pts[x]) for x in xs]
            label = signal if judge == "-" else f"{signal} ({judge} judge)"
            (line,) = ax.plot(xs, mean, marker="o", label=label, linestyle="--" if judge == "model" else "-")
            ax.fill_between(xs, [min(pts[x]) for x in xs], [max(pts[x]) for x in xs], alpha=0.12,
                            color=line.get_color())
        ax.set_title(f"persona: {persona}")
        ax.set_xlabel("updates (16 samples each)")
        ax.set_ylabel("held-out score (first reply meets every preference)")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure_atomic(fig, path)


def write(rows: list[dict], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows(sorted(rows, key=lambda r: tuple(str(r[k]).zfill(4) for k in COLUMNS[:5])))
    write_text_atomic(out / "scores.csv", buf.getvalue())
    write_text_atomic(out / "table.md", table(rows))
    plot(rows, out / "curves.png")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.personalization", description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", type=Path, help="sweep dirs and/or earlier scores.csv files")
    ap.add_argument("--out", type=Path, default=Path("results/personalization"))
    args = ap.parse_args(argv)
    rows = collect(args.inputs)
    if not rows:
        raise SystemExit(f"error: no persona training runs with an evaluation in {[str(p) for p in args.inputs]}")
    write(rows, args.out)
    print(table(rows))
    print(f"[personalization] {len(rows)} scores -> {args.out}/scores.csv, table.md, curves.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
