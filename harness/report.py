"""Human-readable output: the end-of-run summary table."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table


def print_summary(result) -> None:
    console = Console()
    table = Table(title=f"{result.row['env']} / {result.row['agent']} ({result.row['model']}) "
                        f"split={result.row['split']} seed={result.row['seed']}")
    for col in ("task", "success", "outcome", "steps", "infra"):
        table.add_column(col)
    for tid, r in result.metrics["per_task"].items():
        table.add_row(tid, "yes" if r["success"] else "no", f"{r['outcome']:.2f}", str(r["steps"]),
                      "FAIL" if r["infra_failure"] else "")
    console.print(table)
    m = result.metrics
    console.print(f"success rate {m['success_rate']:.1%} over {m['n_graded']} graded tasks "
                  f"({m['infra_failures']} infra failures), {m['tokens']} tokens, {m['wall_s']:.0f} s")
    console.print(f"run dir: {result.row['run_dir']}")
