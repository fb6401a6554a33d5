"""The leaderboard report on disk: `overall.csv` and one `<env>.csv` per env (BFCL data_overall.csv
style), learning-curve PNGs, and a static `index.html` that shows them, all in one folder.

The leaderboard is validated before the first byte is written, so a malformed one leaves an
existing report as it was; each file is replaced atomically.
"""
from __future__ import annotations

import csv
import datetime as dt
import html
import io
import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from harness.leaderboard_report import (
    ENV_COLUMNS,
    NA,
    Entry,
    Stat,
    aggregate,
    by_env,
    env_table,
    overall_table,
    validate,
)
from nextstate.atomic import save_figure_atomic, write_text_atomic


@dataclass
class Report:
    leaderboard: Path
    out_dir: Path
    n_rows: int
    overall: list[list[str]]
    envs: dict[str, list[list[str]]]
    curves: dict[str, list[Path]] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)


def _csv(table: list[list[str]]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(table)
    return buf.getvalue()


def _seed_curve(entry: Entry, seed: int) -> list[tuple[float, float]]:
    """A seed's learning curve: the run dir's metrics.json "curve" when it is still there (run dirs
    are not committed), else the two points every training row carries (before, after)."""
    row = entry.rows[seed]
    try:
        curve = json.loads((Path(row.run_dir) / "metrics.json").read_text()).get("curve")
        if curve and all(len(p) == 2 for p in curve):
            return [(float(x), float(y)) for x, y in curve]
    except (OSError, ValueError, TypeError):
        pass
    before = row.success_before if row.success_before is not None else row.success
    return [(0.0, before), (float(entry.context.train_episodes or 0), row.success)]


def _plot_curves(env: str, entries: list[Entry], out_dir: Path) -> list[Path]:
    """One PNG per (model, split, tasks) of this env: success vs training episodes, a line per
    method (mean over seeds, 95% band where there are two or more), eval-only entries dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures: dict[tuple, list[Entry]] = defaultdict(list)
    for e in entries:
        if e.is_training:
            figures[(e.context.model, e.context.split, e.context.n_tasks)].append(e)
    paths = []
    for i, ((model, split, n_tasks), trained) in enumerate(sorted(figures.items(), key=str), start=1):
        fig, ax = plt.subplots(figsize=(6.4, 4), dpi=110)
        budgets = {e.context.train_episodes for e in trained}
        for j, e in enumerate(sorted(trained, key=lambda e: (e.method.label, e.context.train_episodes))):
            color = f"C{j % 10}"
            curves = [_seed_curve(e, s) for s in e.rows]
            for c in curves:
                ax.plot([p[0] for p in c], [p[1] for p in c], color=color, alpha=0.2, lw=1)
            xs = sorted({p[0] for c in curves for p in c})
            stats = [Stat.of([y for c in curves for x2, y in c if x2 == x]) for x in xs]
            label = e.method.label + (f" [{e.context.train_episodes} ep]" if len(budgets) > 1 else "")
            ax.plot(xs, [s.mean for s in stats], color=color, lw=2, marker="o", label=f"{label} (n={len(curves)})")
            lo = [max(0.0, s.mean - (s.half or 0.0)) for s in stats]  # a rate: the band stops at 0 and 1
            hi = [min(1.0, s.mean + (s.half or 0.0)) for s in stats]
            if any(s.half for s in stats):
                ax.fill_between(xs, lo, hi, color=color, alpha=0.15, lw=0)
        for k, e in enumerate(x for x in entries if not x.is_training and x.context.split == split
                              and x.context.n_tasks == n_tasks):
            ax.axhline(e.success.mean, color="0.4", ls=(0, (4, 2 + k)), lw=1,
                       label=f"{e.context.agent} eval (n={e.success.n})")
        ax.set_xlabel("training episodes")
        ax.set_ylabel(f"{split} success rate ({n_tasks} tasks)")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize=7)
        ax.set_title(f"{env}: {model}")
        fig.tight_layout()
        path = out_dir / f"curves_{re.sub(r'[^A-Za-z0-9_.-]+', '_', env)}_{i}.png"
        paths.append(save_figure_atomic(fig, path))
    return paths


def _html_table(table: list[list[str]], table_id: str) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in table[0])
    body = "\n".join("<tr>" + "".join(f'<td class="{"na" if c == NA else ""}">{html.escape(c)}</td>' for c in row)
                     + "</tr>" for row in table[1:])
    return (f'<table class="leaderboard" id="{table_id}">\n<thead><tr>{head}</tr></thead>\n'
            f'<tbody>\n{body}\n</tbody>\n</table>')


_STYLE = """body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;font-size:13px;margin:1em 0}th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}
th{background:#f0f0f0}td.na{color:#999}img{max-width:100%;border:1px solid #ddd;margin:0.5em 0}
.note{color:#555;font-size:13px;max-width:60em}"""


def _html(report: Report) -> str:
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>NextState leaderboard</title>"
             f"<style>{_STYLE}</style></head><body>",
             "<h1>NextState leaderboard</h1>",
             f"<p class='note'>From <code>{html.escape(str(report.leaderboard))}</code> ({report.n_rows} rows), "
             f"generated {dt.datetime.now().isoformat(timespec='seconds')}. Success is the mean over seeds with a "
             "95% t-interval; Δ vs Outcome is the mean paired difference against the outcome-reward (GRPO) run of "
             "the same env, model, budget and seed. N/A: not evaluated or not applicable.</p>",
             "<h2>Overall</h2>", _html_table(report.overall, "overall")]
    for env, table in report.envs.items():
        parts += [f"<h2 id='h-{html.escape(env)}'>{html.escape(env)}</h2>",
                  f"<p class='note'>CSV: <a href='{html.escape(env)}.csv'>{html.escape(env)}.csv</a></p>",
                  _html_table(table, f"env-{env}")]
        for png in report.curves.get(env, []):
            parts.append(f"<img class='curve' src='{html.escape(png.name)}' alt='learning curves, {html.escape(env)}'>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_report(leaderboard: Path, out_dir: Path, known_envs: set[str] | None = None) -> Report:
    rows = validate(leaderboard, known_envs)  # raises before anything is written
    if known_envs is None:
        from envs import ENVS

        known_envs = set(ENVS)
    entries = aggregate(rows)
    per_env = by_env(entries)
    report = Report(leaderboard, out_dir, len(rows), overall_table(entries, sorted(known_envs)),
                    {env: env_table(es) for env, es in per_env.items()})
    out_dir.mkdir(parents=True, exist_ok=True)
    for env, es in per_env.items():
        report.curves[env] = _plot_curves(env, es, out_dir)
    for name, table in [("overall", report.overall), *report.envs.items()]:
        write_text_atomic(out_dir / f"{name}.csv", _csv(table))
        report.files.append(out_dir / f"{name}.csv")
    write_text_atomic(out_dir / "index.html", _html(report))
    report.files += [p for ps in report.curves.values() for p in ps] + [out_dir / "index.html"]
    return report


def print_tables(report: Report) -> None:
    from rich.table import Table

    from harness.report import console

    shown = ["Rank", "Success", "95% CI", "Seeds", "Δ vs Outcome", "Δ 95% CI", "Model", "Agent", "Signal",
             "Judge", "Hints", "Split", "Tasks", "Train Episodes"]
    idx = [ENV_COLUMNS.index(c) for c in shown]
    out = console()
    for title, table, cols in [("overall", report.overall, list(range(len(report.overall[0]))))] + \
            [(env, t, idx) for env, t in report.envs.items()]:
        t = Table(title=title)
        for c in cols:
            t.add_column(table[0][c])
        for row in table[1:]:
            t.add_row(*[row[c] for c in cols])
        out.print(t)
    out.print(f"report: {report.out_dir / 'index.html'} ({len(report.files)} files)")
