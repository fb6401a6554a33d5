"""The grader's closure: every path a task's verifier touches, recorded by tracing it once.

A list of toolchain paths (envs/sandbox/integrity.py) is beaten by the next path nobody listed: a
`sitecustomize.py` reached through a symlink in /etc, a zip Python probes on its path, an entry
point added to an existing `dist-info`. So the verifier is run once under `strace -f` in a fresh
container of the task's image, after the task's reference solution, and everything it executed,
opened, stat-ed or looked for and did not find is kept, with every directory it listed. At grading,
a path in `docker diff` inside that closure, or a new entry in a directory it lists, is tampering.

What the reference solution itself changed is the task's output, not the toolchain (a task may ask
for a tool in /usr/local/bin that its tests then run): those paths are taken out of the closure, and
the directories it added entries to are not watched for new ones. Paths that are the harness's own
or the agent's scratch (/tests, /logs, /proc, tmpfs mounts) are never in it.

The tracer is the host's strace with its shared libraries, copied into the container and started
through its own loader, so the image needs nothing installed; the traced commands run with the
image's own loader and libraries.
"""
from __future__ import annotations

import json
import os
import posixpath
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from envs.sandbox.integrity import ADDED, DELETED, MODIFIED

TRACER_DIR = "/.nextstate-tracer"  # where the tracer is copied inside the container
TRACE_LOG = f"{TRACER_DIR}/trace.log"  # (dir writable to any verifier user; /tmp: a tmpfs Docker cannot read)
_ALWAYS_IGNORED = ("/proc", "/sys", "/dev", "/tests", "/logs", "/run", TRACER_DIR)
_MERGED_USR = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")  # symlinks to /usr/... on Debian

# `123 openat(AT_FDCWD</tests>, "/usr/lib/x", O_RDONLY) = 3</usr/lib/x>` (strace -f -y)
_CALL = re.compile(r"^\d+\s+(\w+)\((.*)\)\s+=\s+(-?\d+)(?:<([^>]*)>)?")
_DIRFD = re.compile(r"^(?:AT_FDCWD|\d+)<([^>]*)>,\s*")
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_DIR_OPENED = re.compile(r"^(\d+)<([^>]*)>")


class TracerUnavailable(RuntimeError):
    """No strace on this machine: the closure cannot be recorded."""


@dataclass(frozen=True)
class Closure:
    files: frozenset[str]   # every path grading executed, opened, stat-ed or probed
    listed: frozenset[str]  # every directory it listed

    def tampering(self, changes: list[dict], is_dir: Callable[[str], bool]) -> list[str]:
        """What in `changes` (`docker diff`) lies in the closure, as lines like "changed /x (grading
        reads it)"; a changed directory that only gained or lost entries is skipped (its entries
        are in the list themselves)."""
        found = []
        for c in changes:
            path, kind = c["Path"], c["Kind"]
            if path in self.files and not (kind == MODIFIED and is_dir(path)):
                verb = {MODIFIED: "changed", ADDED: "added", DELETED: "deleted"}[kind]
                found.append(f"{verb} {path} (grading reads it)")
            elif kind == ADDED and posixpath.dirname(path) in self.listed:
                found.append(f"added {path} (in {posixpath.dirname(path)}, which grading lists)")
        return found

    def without(self, changes: list[dict]) -> Closure:
        """The closure less what `changes` (the reference solution's) touched: its paths, what lies
        under a directory it added, and the directories it added entries to."""
        changed = {c["Path"] for c in changes}
        added_dirs = tuple(c["Path"] + "/" for c in changes if c["Kind"] == ADDED)  # ("changed": often a parent)
        keep = frozenset(p for p in self.files if p not in changed and not p.startswith(added_dirs))
        grew = {posixpath.dirname(c["Path"]) for c in changes if c["Kind"] == ADDED}
        return Closure(keep, frozenset(self.listed - grew))

    def plus(self, files: list[str], ignored: tuple[str, ...] = ()) -> Closure:
        """The closure with more files (e.g. where its symlinks lead: a stat follows a link and
        strace shows only the name it was given)."""
        keep = _keeper(ignored)
        normal = (posixpath.normpath(f) for f in files)
        more = {a for f in normal if keep(f) for a in _aliases(f)}
        return Closure(self.files | more, self.listed)

    def to_json(self) -> str:
        return json.dumps({"files": sorted(self.files), "listed": sorted(self.listed)}, indent=0)

    @classmethod
    def from_json(cls, text: str) -> Closure:
        data = json.loads(text)
        return cls(frozenset(data["files"]), frozenset(data["listed"]))


def _aliases(path: str) -> set[str]:
    """`path` and its other name under Debian's merged /usr (/lib/x is /usr/lib/x): `docker diff`
    names the real path, a program may use either."""
    for top in _MERGED_USR:
        if path == top or path.startswith(top + "/"):
            return {path, "/usr" + path}
        if path.startswith("/usr" + top + "/"):
            return {path, path[4:]}
    return {path}


def _keeper(ignored: tuple[str, ...]) -> Callable[[str], bool]:
    skip = tuple(p.rstrip("/") for p in (*_ALWAYS_IGNORED, *ignored))
    return lambda path: (path.startswith("/") and path != "/"
                         and not any(path == s or path.startswith(s + "/") for s in skip))


def parse_trace(text: str, ignored: tuple[str, ...] = ()) -> Closure:
    """The closure in an `strace -f -y -e trace=%file,getdents64` log. Relative paths are resolved
    against the directory strace shows for their dirfd; paths under `ignored` (and the harness's
    own: /proc, /tests, ...) are dropped."""
    keep = _keeper(ignored)
    files, listed = set(), set()

    for line in text.splitlines():
        m = _CALL.match(line)
        if m is None:
            continue
        call, args, result, fd_path = m.groups()
        if call == "getdents64":
            d = _DIR_OPENED.match(args)
            if d and keep(posixpath.normpath(d.group(2))):
                listed.add(posixpath.normpath(d.group(2)))
            continue
        if call in ("getcwd", "chdir", "fchdir", "mkdir", "mkdirat", "unlink", "unlinkat", "rmdir",
                    "rename", "renameat", "renameat2", "chmod", "fchmodat", "chown", "fchownat", "utimensat"):
            continue  # where grading writes, not what it reads
        base = ""
        dirfd = _DIRFD.match(args)
        if dirfd:
            base, args = dirfd.group(1), args[dirfd.end():]
        s = _STRING.match(args)
        if s is None or (s.group(1) == "" and "AT_EMPTY_PATH" in args):
            continue  # fstat of an open file: its path was seen when it was opened
        path = s.group(1).encode().decode("unicode_escape", errors="replace")
        path = posixpath.normpath(posixpath.join(base or "/", path))
        for p in (path, fd_path and posixpath.normpath(fd_path)):
            if p and keep(p):
                files.update(_aliases(p))
    return Closure(frozenset(files), frozenset(listed))


def tracer_files() -> dict[str, bytes]:
    """The host's strace, its shared libraries and its loader, as {path in the container: bytes}.
    Raises TracerUnavailable where strace is not installed."""
    strace = shutil.which("strace")
    if strace is None:
        raise TracerUnavailable("strace is not installed (make setup installs it; apt-get install strace); "
                                "it records what a task's tests touch, which grading then protects. "
                                "env.grader_closure=false grades with the toolchain list alone")
    out = subprocess.run(["ldd", strace], capture_output=True, text=True, check=True).stdout
    libs = re.findall(r"(/\S+\.so[.0-9]*)", out)
    files = {f"{TRACER_DIR}/strace": Path(strace).read_bytes()}
    for lib in libs:
        name = "ld.so" if "ld-linux" in lib else os.path.basename(lib)
        files[f"{TRACER_DIR}/{name}"] = Path(lib).read_bytes()
    return files


def traced(command: str) -> str:
    """`command` (a bash command line) run under the tracer, its log in TRACE_LOG."""
    quoted = "'" + command.replace("'", "'\\''") + "'"
    return (f"{TRACER_DIR}/ld.so --library-path {TRACER_DIR} {TRACER_DIR}/strace -f -qq -y "
            f"-e trace=%file,getdents64 -e signal=none -o {TRACE_LOG} -- bash -c {quoted}")
