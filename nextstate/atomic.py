"""Writes that never leave a half-written file: write a sibling temp file, fsync, rename."""
from __future__ import annotations

import fcntl
import json
import os
import sys
import tempfile
from pathlib import Path


def write_text_atomic(path: Path | str, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def save_figure_atomic(fig, path: Path | str) -> Path:
    """A matplotlib figure as a PNG that readers never see half-written (the figure is closed)."""
    import matplotlib.pyplot as plt

    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp.png")
    try:
        fig.savefig(tmp)
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        tmp.unlink(missing_ok=True)
    return path


def write_json_atomic(path: Path | str, obj) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def _cut_torn_tail(f) -> bytes | None:
    """On a binary file open for reading and writing: cut a torn last line off (returned), or give a
    whole record that lacks only its newline that newline back."""
    size = f.seek(0, os.SEEK_END)
    if size == 0:
        return None
    f.seek(size - 1)
    if f.read(1) == b"\n":
        return None
    start = size  # the torn line starts after the last newline: read back only as far as that
    while start > 0:
        lo = max(0, start - (1 << 16))
        f.seek(lo)
        nl = f.read(start - lo).rfind(b"\n")
        if nl >= 0:
            start = lo + nl + 1
            break
        start = lo
    f.seek(start)
    tail = f.read()
    try:
        json.loads(tail)
    except ValueError:
        f.truncate(start)
        f.flush()
        os.fsync(f.fileno())
        return tail
    f.write(b"\n")
    f.flush()
    os.fsync(f.fileno())
    return None


def _warn_torn(path, tail: bytes | None) -> bytes | None:
    if tail is not None:
        shown = tail[:80].decode(errors="replace")
        print(f"[nextstate] warning: {path}: dropped a torn last line ({len(tail)} bytes, left by a run killed "
              f"mid-write; that record was not finished): {shown!r}{'...' if len(tail) > 80 else ''}",
              file=sys.stderr)
    return tail


def drop_torn_tail(path: Path | str) -> bytes | None:
    """Make a JSONL file end on a whole line (the resume reader calls it before reading). A run killed
    mid-write leaves a last line without its newline: if that fragment is not a JSON record it is cut
    off, with a warning on stderr, and returned; a record that lacks only its newline gets it back.
    Appending to a fragment would glue the next record onto it and lose both. None when nothing was cut."""
    try:
        f = open(path, "rb+")
    except FileNotFoundError:
        return None
    with f:
        fcntl.flock(f, fcntl.LOCK_EX)
        return _warn_torn(path, _cut_torn_tail(f))


def write_jsonl_atomic(path: Path | str, rows) -> None:
    """A whole JSONL file at once, replacing what was there (`append_jsonl` adds to it)."""
    write_text_atomic(path, "".join(json.dumps(r, default=str) + "\n" for r in rows))


def append_jsonl(path: Path | str, obj) -> None:
    """One line per record, flushed and fsynced: a killed run keeps every finished record. A torn last
    line left by a killed writer is dropped first (`drop_torn_tail`), never appended to; the check and
    the write hold the file's lock, so a writer never cuts another's line."""
    line = (json.dumps(obj, default=str) + "\n").encode()
    with open(path, "ab+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        _warn_torn(path, _cut_torn_tail(f))
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def read_jsonl(path: Path | str) -> list[dict]:
    """Records of a JSONL file. A last line without its newline that is not a record (a run killed
    mid-write, or a writer still writing it) is skipped quietly: the next append drops it. A bad line
    inside the file (corruption) is skipped with a warning on stderr. Reading never changes the file."""
    out = []
    p = Path(path)
    if not p.exists():
        return out
    text = p.read_text(errors="replace")
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            if i < len(lines) - 1:  # a whole line, newline and all, that is no record
                print(f"[nextstate] warning: {p}: line {i + 1} is not a JSON record; skipped", file=sys.stderr)
    return out
