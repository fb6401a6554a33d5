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
from dataclasses import dataclass, field
from pathlib import Path

from harness.reports.leaderboard import NA, aggregate, by_env, validate
from harness.reports.plots import env_chart, leaderboard_curves
from harness.reports.tables import env_table, overall_table
from nextstate.atomic import write_text_atomic


@dataclass
class Report:
    leaderboard: Path
    out_dir: Path
    n_rows: int
    overall: list[list[str]]
    envs: dict[str, list[list[str]]]
    curves: dict[str, list[Path]] = field(default_factory=dict)
    charts: dict[str, Path] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)


def to_csv(table: list[list[str]]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(table)
    return buf.getvalue()


def _html_table(table: list[list[str]], table_id: str) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in table[0])
    body = "\n".join("<tr>" + "".join(f'<td class="{"na" if c == NA else ""}">{html.escape(c)}</td>' for c in row)
                     + "</tr>" for row in table[1:])
    return (f'<div class="scroll"><table class="leaderboard" id="{table_id}">\n<thead><tr>{head}</tr></thead>\n'
            f'<tbody>\n{body}\n</tbody>\n</table></div>')


_STYLE = """body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;font-size:13px;margin:1em 0}th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}
th{background:#f0f0f0}td.na{color:#999}img{max-width:100%;border:1px solid #ddd;margin:0.5em 0}
.note{color:#555;font-size:13px;max-width:60em}
.scroll{max-width:100%;overflow-x:auto}th{white-space:nowrap}"""


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
        if env in report.charts:
            parts.append(f"<img class='chart' src='{html.escape(report.charts[env].name)}' "
                         f"alt='success by entry, {html.escape(env)}'>")
        for png in report.curves.get(env, []):
            parts.append(f"<img class='curve' src='{html.escape(png.name)}' alt='learning curves, {html.escape(env)}'>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_report(leaderboard: Path, out_dir: Path, known_envs: set[str] | None = None) -> Report:
    """The whole report of a leaderboard in `out_dir`: CSVs, curves, index.html."""
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
        report.curves[env] = leaderboard_curves(env, es, out_dir)
        report.charts[env] = env_chart(env, es, out_dir)
    for name, table in [("overall", report.overall), *report.envs.items()]:
        write_text_atomic(out_dir / f"{name}.csv", to_csv(table))
        report.files.append(out_dir / f"{name}.csv")
    write_text_atomic(out_dir / "index.html", _html(report))
    report.files += [p for ps in report.curves.values() for p in ps] + list(report.charts.values())
    report.files.append(out_dir / "index.html")
    return report
