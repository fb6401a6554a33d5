"""Human-readable output: the end-of-run summary table."""
from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table


def console() -> Console:
    """A console for tables. Piped into a log (CI, `make demo > log`), rich would squeeze them to 80
    columns and cut every cell; there they get 160."""
    return Console() if sys.stdout.isatty() else Console(width=160)


def print_summary(result) -> None:
    out = console()
    table = Table(title=f"{result.row['env']} / {result.row['agent']} ({result.row['model']}) "
                        f"split={result.row['split']} seed={result.row['seed']}")
    for col in ("task", "success", "outcome", "steps", "infra"):
        table.add_column(col)
    for tid, r in result.metrics["per_task"].items():
        table.add_row(tid, "yes" if r["success"] else "no", f"{r['outcome']:.2f}", str(r["steps"]),
                      "FAIL" if r["infra_failure"] else "")
    out.print(table)
    m = result.metrics
    out.print(f"success rate {m['success_rate']:.1%} over {m['n_graded']} graded tasks "
              f"({m['infra_failures']} infra failures), {m['tokens']} tokens, {m['wall_s']:.0f} s")
    out.print(f"run dir: {result.row['run_dir']}")
