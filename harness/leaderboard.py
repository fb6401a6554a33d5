"""results/leaderboard.csv: one row per finished run, appended under a file lock and written
atomically, so concurrent sweep jobs never clobber each other and a crash never truncates it."""
from __future__ import annotations

import csv
import fcntl
import io
from contextlib import contextmanager
from pathlib import Path

from .atomic import write_text_atomic

COLUMNS = ["timestamp", "env", "suite", "split", "agent", "model", "signal", "seed", "n_tasks",
           "success_rate", "mean_steps", "infra_failures", "tokens", "wall_s", "run_dir", "git_commit"]


class LeaderboardError(ValueError):
    pass


@contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def read_numbered_rows(path: Path | str) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """The header and every row with the file line it ends on (for errors that name the line)."""
    path = Path(path)
    if not path.exists():
        return list(COLUMNS), []
    text = path.read_text()
    reader = csv.DictReader(io.StringIO(text))
    header = reader.fieldnames or []
    missing = [c for c in ("env", "agent", "seed") if c not in header]
    if missing:
        raise LeaderboardError(f"{path}: line 1: header lacks columns {missing}")
    rows = []
    for row in reader:
        if None in row or any(v is None for v in row.values()):
            raise LeaderboardError(f"{path}: line {reader.line_num}: expected {len(header)} fields "
                                   "(truncated or malformed row); the file was left untouched")
        rows.append((reader.line_num, row))
    return header, rows


def read_rows(path: Path | str) -> tuple[list[str], list[dict[str, str]]]:
    header, numbered = read_numbered_rows(path)
    return header, [row for _, row in numbered]


def append_row(path: Path | str, row: dict) -> None:
    path = Path(path)
    with _locked(path):
        header, rows = read_rows(path)
        header = header + [k for k in row if k not in header]
        rows.append({k: ("" if v is None else v) for k, v in row.items()})
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=header, restval="", lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        write_text_atomic(path, buf.getvalue())


def main(argv: list[str] | None = None) -> int:
    """`python -m harness.leaderboard`: the aggregated report (harness/report_html.py) of a leaderboard."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(
        prog="python -m harness.leaderboard",
        description="Aggregate a leaderboard over seeds: mean and 95%% CI, paired deltas against the "
                    "outcome-reward baseline, per-env CSVs and a static HTML report with learning curves.")
    parser.add_argument("leaderboard", nargs="?", help="the CSV (default: <paths.results_dir>/leaderboard.csv)")
    parser.add_argument("--out", help="report folder (default: <paths.results_dir>/report)")
    args = parser.parse_args(argv)
    if args.leaderboard is None or args.out is None:
        from .config import compose

        results = Path(compose().paths.results_dir)
        args.leaderboard = args.leaderboard or results / "leaderboard.csv"
        args.out = args.out or results / "report"
    # Run as `-m`, this file is __main__: catch the error class the report modules import.
    from .leaderboard import LeaderboardError
    from .report_html import print_tables, write_report

    try:
        report = write_report(Path(args.leaderboard), Path(args.out))
    except LeaderboardError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print_tables(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
