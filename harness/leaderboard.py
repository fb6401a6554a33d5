"""`python -m harness.leaderboard [leaderboard.csv] [--out DIR]`: the aggregated report of a leaderboard
(harness/reports/). The rows themselves are written and read by nextstate/leaderboard.py."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nextstate.leaderboard import LeaderboardError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.leaderboard",
        description="Aggregate a leaderboard over seeds: mean and 95%% CI, paired deltas against the "
                    "outcome-reward baseline, per-env CSVs and a static HTML report with learning curves.")
    parser.add_argument("leaderboard", nargs="?", help="the CSV (default: <paths.results_dir>/leaderboard.csv)")
    parser.add_argument("--out", help="report folder (default: <paths.results_dir>/report)")
    args = parser.parse_args(argv)
    if args.leaderboard is None or args.out is None:
        from nextstate.config import compose

        results = Path(compose().paths.results_dir)
        args.leaderboard = args.leaderboard or results / "leaderboard.csv"
        args.out = args.out or results / "report"
    from harness.reports.console import print_tables
    from harness.reports.html_report import write_report

    try:
        report = write_report(Path(args.leaderboard), Path(args.out))
    except LeaderboardError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print_tables(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
