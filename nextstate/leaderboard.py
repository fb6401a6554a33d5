"""results/leaderboard.csv: one row per finished run, appended under a file lock and written
atomically, so concurrent sweep jobs never clobber each other and a crash never truncates it. Eval,
training and SFT write rows; the reports (harness/) read them: the row is a seam, so it lives here."""
from __future__ import annotations

import csv
import fcntl
import io
import subprocess
from contextlib import contextmanager
from pathlib import Path

from nextstate.atomic import write_text_atomic

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


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, timeout=5).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"
