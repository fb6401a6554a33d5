"""Carrying out the file-edit actions (`envs.swe.actions.Replace` / `Write`) in a sandbox.

The file is read with the Docker archive API (any size, exact bytes) and written back through
the agent's own shell (`base64 -d > path`), which keeps the file's owner and mode and honours
the agent's permissions: an edit can do nothing a shell command could not. The result says what
changed, with a short unified diff: that diff is the edit's next state.
"""
from __future__ import annotations

import base64
import difflib
import posixpath
import re
import shlex
from dataclasses import dataclass

from envs.sandbox import Sandbox
from envs.swe.actions import Replace, Write


@dataclass(frozen=True)
class EditResult:
    ok: bool
    path: str  # absolute, inside the container
    message: str
    diff: str = ""

    @property
    def text(self) -> str:
        return f"{self.message}\n{self.diff}".rstrip("\n")


def short_diff(old: str, new: str, path: str, max_lines: int) -> str:
    lines = list(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                      f"a/{path}", f"b/{path}", n=2))
    lines = [ln if ln.endswith("\n") else ln + "\n\\ No newline at end of file\n" for ln in lines]
    if len(lines) > max_lines:
        lines = lines[:max_lines] + [f"[... {len(lines) - max_lines} more diff lines ...]\n"]
    return "".join(lines)


def _replace_all(content: str, pairs, path: str) -> tuple[str | None, str]:
    # Search blocks end with a newline; a file whose last line has none still matches there.
    had_newline = content.endswith("\n") or not content
    work = content if had_newline else content + "\n"
    for k, (old, new) in enumerate(pairs, 1):
        which = f"SEARCH block {k}" if len(pairs) > 1 else "the SEARCH text"
        count = work.count(old)
        if count == 1:
            work = work.replace(old, new, 1)
            continue
        if count > 1:
            return None, (f"{which} occurs {count} times in {path}; include more surrounding lines "
                          "so that it is unique (nothing was changed)")
        squash = re.compile(r"\s+")
        hint = (" (it would match if whitespace were ignored: check the indentation)"
                if squash.sub(" ", old).strip() in squash.sub(" ", work) else "")
        return None, f"{which} was not found in {path}{hint}; nothing was changed"
    return (work if had_newline else work[:-1]), ""


def _read(sb: Sandbox, path: str) -> tuple[str | None, str]:
    """(content, error); content None when the file is missing (error empty) or unreadable."""
    probe = sb.exec(f"if [ -d {shlex.quote(path)} ]; then echo dir; elif [ -e {shlex.quote(path)} ]; "
                    f"then [ -r {shlex.quote(path)} ] && echo file || echo unreadable; else echo missing; fi")
    kind = probe.output.strip()
    if kind == "missing":
        return None, ""
    if kind != "file":
        return None, f"{path} is {'a directory' if kind == 'dir' else 'not readable'}"
    try:
        data = sb.download(path)
    except FileNotFoundError:  # removed since the probe (the agent's background job)
        return None, ""
    try:
        return data.decode("utf-8"), ""
    except UnicodeDecodeError:
        return None, f"{path} is not UTF-8 text; change it with shell commands"


def _write(sb: Sandbox, path: str, content: str) -> str:
    """Write through the shell; returns an error message, or '' on success."""
    payload = base64.encodebytes(content.encode("utf-8")).decode("ascii")
    q = shlex.quote(path)
    r = sb.exec(f"mkdir -p -- {shlex.quote(posixpath.dirname(path))} && base64 -d > {q} <<'__NS_EDIT__'\n"
                f"{payload}__NS_EDIT__")
    return "" if r.exit_code == 0 else f"could not write {path}: {r.output.strip()[-500:]}"


def apply_edit(sb: Sandbox, op: Replace | Write, cwd: str, max_diff_lines: int = 60) -> EditResult:
    """Carry out one edit; `cwd` is the agent shell's working directory (relative paths)."""
    path = posixpath.normpath(posixpath.join(cwd, op.path))
    old, error = _read(sb, path)
    if error:
        return EditResult(False, path, error)
    if isinstance(op, Replace):
        if old is None:
            return EditResult(False, path, f"{path} does not exist; create it with a ```write block")
        new, error = _replace_all(old, op.pairs, path)
        if new is None:
            return EditResult(False, path, error)
        verb = f"Edited {path} ({len(op.pairs)} replacement{'s' if len(op.pairs) > 1 else ''})"
    else:
        new = op.content
        verb = (f"Created {path}" if old is None else f"Overwrote {path}") + f" ({new.count(chr(10))} lines)"
    if new == old:
        return EditResult(True, path, f"{verb}: the content is unchanged")
    error = _write(sb, path, new)
    if error:
        return EditResult(False, path, error)
    return EditResult(True, path, verb, short_diff(old or "", new, op.path, max_diff_lines))
