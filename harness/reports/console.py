"""Tables printed: the end-of-run summary, the leaderboard report's tables, and the console they go to."""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from harness.reports.tables import ENV_COLUMNS

if TYPE_CHECKING:
    from harness.reports.html_report import Report


def console() -> Console:
    """A console for tables. Piped into a log (CI, `make demo > log`), rich would squeeze them to 80
    columns and cut every cell; there they get 160."""
    return Console() if sys.stdout.isatty() else Console(width=160)


def rich_table(title: str, header: list[str], rows: list[list[str]]) -> Table:
    table = Table(title=title)
    for c in header:
        table.add_column(c)
    for row in rows:
        table.add_row(*row)
    return table


def print_summary(result) -> None:
    """One run's table: a row per task, then the totals and where the run dir is."""
    out = console()
    r, m = result.row, result.metrics
    out.print(rich_table(
        f"{r['env']} / {r['agent']} ({r['model']}) split={r['split']} seed={r['seed']}",
        ["task", "success", "outcome", "steps", "infra"],
        [[tid, "yes" if t["success"] else "no", f"{t['outcome']:.2f}", str(t["steps"]),
          "FAIL" if t["infra_failure"] else ""] for tid, t in m["per_task"].items()]))
    out.print(f"success rate {m['success_rate']:.1%} over {m['n_graded']} graded tasks "
              f"({m['infra_failures']} infra failures), {m['tokens']} tokens, {m['wall_s']:.0f} s")
    apart = {"tampered with their grading": m.get("tampered"), "verifier killed at its time limit":
             m.get("verifier_timeouts"), "suspicious patches": m.get("suspicious")}
    if flagged := [f"{n} {what}" for what, n in apart.items() if n]:
        out.print("flagged: " + "; ".join(flagged) + " (`info` of their trajectories)")
    out.print(f"run dir: {r['run_dir']}")


SHOWN = ["Rank", "Success", "95% CI", "Seeds", "Δ vs Outcome", "Δ 95% CI", "Model", "Agent", "Signal",
         "Judge", "Hints", "Split", "Tasks", "Train Episodes"]  # of an env's table, what fits a terminal


def print_tables(report: "Report") -> None:
    """The leaderboard report's overall table and each env's (its main columns), then where it went."""
    out = console()
    out.print(rich_table("overall", report.overall[0], report.overall[1:]))
    idx = [ENV_COLUMNS.index(c) for c in SHOWN]
    for env, table in report.envs.items():
        out.print(rich_table(env, SHOWN, [[row[i] for i in idx] for row in table[1:]]))
    out.print(f"report: {report.out_dir / 'index.html'} ({len(report.files)} files)")
