"""results/leaderboard.csv: one row per finished run, appended under a file lock and written
atomically, so concurrent sweep jobs never clobber each other and a crash never truncates it. Eval,
training and SFT write rows; the reports (harness/) read them: the row is a seam, so it lives here.

No result is lost (`commit_run`): a run's metrics.json and its row are committed in three steps, each
an atomic write, so a kill -9 at any moment leaves either both or a row that `resume=` files exactly
once. A malformed leaderboard never costs a finished run its row either (`file_row`): the row is kept
in `leaderboard.pending/` beside the CSV, and `python -m nextstate.leaderboard file-pending` files the
kept rows once the CSV is repaired."""
from __future__ import annotations

import argparse
import csv
import fcntl
import io
import json
import re
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

from nextstate.atomic import write_json_atomic, write_text_atomic

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


def _write_rows(path: Path, header: list[str], rows: list[dict]) -> None:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=header, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomic(path, buf.getvalue())


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]|\r\n?|\n")
_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_value(value) -> str:
    """A row value as one safe CSV cell: line breaks and other control characters become a space, a lone
    surrogate the replacement character. Written raw, a carriage return (which the writer does not
    quote under a `\n` terminator) split the row, and every later run failed to read the file."""
    if value is None:
        return ""
    return _CONTROL.sub(" ", _SURROGATE.sub("\ufffd", str(value)))


def _add(path: Path, row: dict, once: bool) -> bool:
    """Under the lock: append `row`, unless `once` and the leaderboard already holds it (the same
    run_dir and timestamp: a run killed after the append but before it marked the row filed)."""
    header, rows = read_rows(path)
    header = header + [k for k in row if k not in header]
    row = {k: clean_value(v) for k, v in row.items()}
    if once and any(r.get("run_dir") == row.get("run_dir") and r.get("timestamp") == row.get("timestamp")
                    for r in rows):
        return False
    rows.append(row)
    _write_rows(path, header, rows)
    return True


def append_row(path: Path | str, row: dict) -> None:
    """Append `row`; a malformed file raises `LeaderboardError` naming its line and is left untouched."""
    path = Path(path)
    with _locked(path):
        _add(path, row, once=False)


def append_row_once(path: Path | str, row: dict) -> bool:
    """Append `row` unless the leaderboard already holds it (checked under the lock); True if appended."""
    path = Path(path)
    with _locked(path):
        return _add(path, row, once=True)


# --- no result lost -------------------------------------------------------------------------------

MARK = "leaderboard_row"  # metrics.json's record of the run's row: {"leaderboard", "row", "filed"}


def pending_dir(leaderboard: Path | str) -> Path:
    """Where rows wait that a malformed leaderboard could not take: `<results>/leaderboard.pending/`."""
    leaderboard = Path(leaderboard)
    return leaderboard.with_name(leaderboard.stem + ".pending")


def _kept_file(leaderboard: Path, row: dict) -> Path:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{Path(str(row.get('run_dir', 'run'))).name}__{row.get('timestamp', '')}")
    return pending_dir(leaderboard) / f"{name}.json"


def file_row(leaderboard: Path | str, row: dict) -> bool:
    """File a finished run's row exactly once: True once the leaderboard holds it.

    A malformed leaderboard (a torn or hand-edited line) is reported on stderr, naming its file and
    line, and the run still succeeds: its row is kept as `leaderboard.pending/<run>__<time>.json`
    beside the CSV, and False is returned. Why there, and not in a `leaderboard.rejected.csv`: a second
    CSV is one more file for every report to read (or silently miss), and merging it back needs the
    same header union and the same checks as the leaderboard itself; one JSON file per row is written
    atomically with no lock and no header, names its run, is filed by one command once the CSV is
    repaired (`python -m nextstate.leaderboard file-pending <leaderboard.csv>`), and, since filing
    checks the CSV for the row first, filing it twice (that command, or `resume=` of the run) is
    harmless. The CSV itself is never rewritten around a bad line: which line is right is the
    user's call."""
    leaderboard = Path(leaderboard)
    kept = _kept_file(leaderboard, row)
    try:
        append_row_once(leaderboard, row)
    except LeaderboardError as e:
        write_json_atomic(kept, {"leaderboard": str(leaderboard), "row": row})
        print(f"[nextstate] warning: the leaderboard is malformed, so this run's row was not added: {e}\n"
              f"  the row is kept in {kept}; repair {leaderboard} (or move it aside), then file the kept rows with:\n"
              f"  python -m nextstate.leaderboard file-pending {leaderboard}", file=sys.stderr)
        return False
    kept.unlink(missing_ok=True)
    return True


def commit_run(run_dir: Path | str, metrics: dict, leaderboard: Path | str, row: dict) -> dict:
    """Write the run's metrics.json and file its leaderboard row so that a kill -9 at any moment
    loses neither: (1) metrics.json, with the row marked unfiled (one atomic write: a kill before it
    leaves an unfinished run that `resume=` finishes); (2) the row appended, unless the leaderboard
    already holds it (under the lock); (3) metrics.json marked filed. A kill between (1) and (3) leaves
    a finished run whose row `file_pending_row` (called by `resume=`) files, and (2)'s check keeps a
    row appended just before the kill from being filed twice. Returns the metrics as written."""
    run_dir = Path(run_dir)
    leaderboard = Path(leaderboard).absolute()
    metrics = {**metrics, MARK: {"leaderboard": str(leaderboard), "row": row, "filed": False}}
    write_json_atomic(run_dir / "metrics.json", metrics)
    return _file_marked(run_dir, metrics)


def _file_marked(run_dir: Path, metrics: dict) -> dict:
    mark = metrics[MARK]
    if file_row(mark["leaderboard"], mark["row"]):
        metrics = {**metrics, MARK: {**mark, "filed": True}}
        write_json_atomic(run_dir / "metrics.json", metrics)
    return metrics


def file_pending_row(run_dir: Path | str) -> bool | None:
    """A finished run whose row a kill (or a malformed leaderboard) left unfiled gets it filed now,
    exactly once. True: filed now (or found already there); False: kept again, the leaderboard being
    still malformed (a warning said so); None: nothing was pending (no metrics.json, the row filed, or
    a run finished before rows were marked)."""
    run_dir = Path(run_dir)
    try:
        metrics = json.loads((run_dir / "metrics.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None
    mark = metrics.get(MARK)
    if not isinstance(mark, dict) or mark.get("filed", True):
        return None
    return _file_marked(run_dir, metrics)[MARK]["filed"]


def file_kept_rows(leaderboard: Path | str) -> tuple[int, int]:
    """File every row kept in `leaderboard.pending/` (each once; a row already there is not added
    again). Returns (filed, already there); raises `LeaderboardError` while the CSV is malformed."""
    leaderboard = Path(leaderboard)
    filed = there = 0
    for kept in sorted(pending_dir(leaderboard).glob("*.json")):
        row = json.loads(kept.read_text())["row"]
        if append_row_once(leaderboard, row):
            filed += 1
        else:
            there += 1
        kept.unlink()
    return filed, there


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nextstate.leaderboard",
                                     description="File the rows a malformed leaderboard could not take.")
    sub = parser.add_subparsers(dest="command", required=True)
    fp = sub.add_parser("file-pending", help="file the rows kept in <leaderboard>.pending/ (after repairing the CSV)")
    fp.add_argument("leaderboard", help="the CSV, e.g. results/leaderboard.csv")
    args = parser.parse_args(argv)
    try:
        filed, there = file_kept_rows(args.leaderboard)
    except LeaderboardError as e:
        print(f"error: {e}; repair it first (the kept rows wait in {pending_dir(args.leaderboard)})", file=sys.stderr)
        return 2
    print(f"{args.leaderboard}: {filed} kept row(s) filed, {there} already there")
    return 0


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, timeout=5).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


if __name__ == "__main__":
    raise SystemExit(main())
