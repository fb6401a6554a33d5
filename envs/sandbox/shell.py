"""A persistent bash session inside a container, spoken to over one Docker exec socket.

One `docker exec` per command costs ~50 ms and forgets `cd` and `export`; one long-lived shell costs
~1 ms a command and keeps both. Each command is sent as one line: the command, ANSI-C quoted, is
`eval`ed with stdin from /dev/null, and then the shell prints a sentinel line with the exit code and
the cwd.

The sentinel is what tells the harness that the command ended and how: a command that could print
it would forge its own exit code (`[exit code 0]` for a failure, a free `exit_ok` step label). So
each command gets a fresh random nonce, and the nonce is never where the command can read it: not
an argument (`$1`, `$@`, `BASH_ARGV`), not a variable, not the environment, not a function body.
It is a literal in the part of the line after the `eval`, which bash has parsed but not yet run
(bash reads the whole line from the socket before it runs any of it, so nothing is left on stdin
for the command to read either). A marker with an earlier command's nonce, or a guessed one, does
not end this command. The wrapper is sent inline with each command and calls `builtin printf`, so
an alias or function the agent defined (`printf`, `eval`) does not replace it.

What this does not stop: a command that reads the shell's own memory (`/proc/$$/mem`) for the
nonce, or that rewrites bash itself (a function named `builtin`, a DEBUG trap). The exit code is an
observation; the reward never depends on it (the task's tests decide, run where the agent cannot
reach them: see envs/terminal/env.py).
"""
from __future__ import annotations

import re
import secrets
import select
import socket
import struct
import time
from dataclasses import dataclass

from envs.sandbox.errors import SandboxError

_SAFE = set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-+=.,:/@%^*()[]{}<>|&;~#!?")

START_TRIES = 3  # a shell that does not start is not retried for ever
_PRELUDE = "export TERM=dumb PAGER=cat GIT_PAGER=cat DEBIAN_FRONTEND=noninteractive PYTHONUNBUFFERED=1\n"


def command_line(command: str, marker: str) -> str:
    """The line the shell is sent for one command: it runs in the shell itself (so cd/export
    persist), stdin from /dev/null (so `cat` with no file cannot swallow the next command), stderr
    merged into stdout; then `marker` (a literal the command cannot see) with its exit code and the
    cwd. `\\builtin`: an alias named `builtin` is not expanded."""
    return (f"{{ \\eval {ansi_c_quote(command)} ; }} </dev/null 2>&1; "
            f"\\builtin printf '\\n%s %d %s\\n' {marker} \"$?\" \"$PWD\"\n")


def ansi_c_quote(text: str) -> str:
    """Quote any text (newlines, quotes, binary junk) as a bash $'...' literal."""
    data = text.encode("utf-8", errors="surrogateescape")
    return "$'" + "".join(chr(b) if b in _SAFE else f"\\x{b:02x}" for b in data) + "'"


@dataclass(frozen=True)
class ShellResult:
    output: str
    exit_code: int | None
    cwd: str
    timed_out: bool = False
    truncated_bytes: int = 0
    restarted: bool = False  # the shell itself had to be replaced (it exited or hung in a builtin)
    seconds: float = 0.0


class _CappedOutput:
    """Keeps the head and the tail of a stream; counts what was dropped in between."""

    def __init__(self, cap: int):
        self.head_cap, self.tail_cap = cap // 2, cap - cap // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            excess = len(self.tail) - self.tail_cap
            if excess > 0:
                del self.tail[:excess]
                self.dropped += excess

    def text(self) -> str:
        body = bytes(self.head)
        if self.dropped:
            body += f"\n[... {self.dropped} bytes of output truncated ...]\n".encode()
        body += bytes(self.tail)
        return body.decode("utf-8", errors="replace")


class PersistentShell:
    """A bash process in a running container. Not thread-safe: one command at a time."""

    def __init__(self, api, container_id: str, *, user: str | None, workdir: str, output_cap: int):
        self._api = api
        self._cid = container_id
        self._user = user or "root"
        self._cwd = workdir
        self._cap = output_cap
        self._sock: socket.socket | None = None
        self._frames = bytearray()  # raw multiplexed bytes not yet parsed
        self.pid: int | None = None  # the shell's pid inside the container
        self._start()

    # -- lifecycle -------------------------------------------------------------------------------
    def _start(self) -> None:
        """A new bash, checked by a first command; a few tries, then a SandboxError saying why (a user
        the image does not have, no bash ...). Never through `run`, whose restart would recurse."""
        why = ""
        for _ in range(START_TRIES):
            exec_id = self._api.exec_create(
                self._cid, ["bash", "--noprofile", "--norc"], stdin=True, stdout=True, stderr=True,
                tty=False, user=self._user, workdir=self._cwd,
            )["Id"]
            sock = self._api.exec_start(exec_id, socket=True)
            self._sock = getattr(sock, "_sock", sock)
            self._frames.clear()
            self._sock.sendall(_PRELUDE.encode())
            marker = "__NS_" + secrets.token_hex(12)
            self._sock.sendall(command_line("printf '%s' $$", marker).encode())
            out = _CappedOutput(self._cap)
            found = self._read_until_marker(out, marker.encode(), deadline=time.monotonic() + 10)
            pid = out.text().strip()
            if found is not None and found[0] == 0 and pid.isdigit():
                self.pid = int(pid)
                return
            code = self._exit_code(exec_id)
            # Docker says why on the socket ("unable to find user ...") or only through exit code 126,
            # depending on timing: both are kept
            why = "; ".join(filter(None, [pid[:300], f"exec exit code {code}" + (
                " (the image has no such user, or no bash)" if code == 126 else "")]))
            self.close()
        raise SandboxError(f"the shell (bash as user {self._user!r} in {self._cwd}) did not start after "
                           f"{START_TRIES} tries: {why}")

    def _exit_code(self, exec_id: str):
        try:
            return self._api.exec_inspect(exec_id).get("ExitCode")
        except Exception as e:  # noqa: BLE001  (only for the message)
            return f"unknown ({e})"

    def restart(self) -> None:
        """A new bash in the last cwd (the old one was killed from outside)."""
        self.close()
        self._start()

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    # -- commands ---------------------------------------------------------------------------------
    def run(self, command: str, timeout: float = 30.0) -> ShellResult:
        if self._sock is None:
            raise SandboxError("shell is closed")
        t0 = time.monotonic()
        marker = "__NS_" + secrets.token_hex(12)  # fresh for each command (see the module docstring)
        self._sock.sendall(command_line(command, marker).encode())
        out = _CappedOutput(self._cap)
        found = self._read_until_marker(out, marker.encode(), deadline=t0 + timeout)
        if found is not None:
            rc, self._cwd = found
            return ShellResult(out.text(), rc, self._cwd, truncated_bytes=out.dropped,
                               seconds=time.monotonic() - t0)
        if found is None and self._sock is None:  # the shell exited (e.g. `exit`, `set -e` + failure)
            self._start()
            return ShellResult(out.text() + "\n[the shell exited; a new shell was started in "
                               f"{self._cwd}; shell variables were reset]", None, self._cwd,
                               truncated_bytes=out.dropped, restarted=True,
                               seconds=time.monotonic() - t0)
        return self._recover_from_timeout(out, marker.encode(), timeout, t0)

    def _recover_from_timeout(self, out: _CappedOutput, marker: bytes, timeout: float, t0: float):
        # Kill everything the shell started; if the shell was itself busy (a builtin loop), replace it.
        self._kill_descendants()
        found = self._read_until_marker(out, marker, deadline=time.monotonic() + 2.0)
        note = f"\n[command timed out after {timeout:g}s and was killed]"
        if found is not None:
            rc, self._cwd = found
            return ShellResult(out.text() + note, rc, self._cwd, timed_out=True,
                               truncated_bytes=out.dropped, seconds=time.monotonic() - t0)
        self._kill_shell()
        self.close()
        self._start()
        note += f"\n[the shell was restarted in {self._cwd}; shell variables were reset]"
        return ShellResult(out.text() + note, None, self._cwd, timed_out=True,
                           truncated_bytes=out.dropped, restarted=True,
                           seconds=time.monotonic() - t0)

    def _kill_descendants(self) -> None:
        script = (
            "d() { local c; for c in $(cat /proc/$1/task/*/children 2>/dev/null); do d $c; echo $c; done; };"
            f" p=$(d {self.pid}); [ -n \"$p\" ] && kill -9 $p 2>/dev/null; true"
        )
        self._api.exec_start(self._api.exec_create(self._cid, ["sh", "-c", script], user="root")["Id"])

    def kill_all(self) -> None:
        """The shell, its descendants, and then the socket."""
        self._kill_descendants()
        self._kill_shell()
        self.close()

    def _kill_shell(self) -> None:
        self._api.exec_start(
            self._api.exec_create(self._cid, ["kill", "-9", str(self.pid)], user="root")["Id"])

    # -- stream parsing ---------------------------------------------------------------------------
    def _read_until_marker(self, out: _CappedOutput, marker: bytes, deadline: float):
        """Feed output into `out` until the sentinel line; returns (exit_code, cwd), or None on
        timeout or EOF (then self._sock is None)."""
        window = bytearray()
        keep = len(marker) + 4096  # enough to hold the sentinel line when it straddles two reads
        pattern = re.compile(rb"\n" + re.escape(marker) + rb" (-?\d+) ([^\n]*)\n")
        while True:
            m = pattern.search(window)
            if m:
                out.add(bytes(window[: m.start()]))
                return int(m.group(1)), m.group(2).decode("utf-8", errors="replace")
            if len(window) > keep:
                out.add(bytes(window[:-keep]))
                del window[:-keep]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                out.add(bytes(window))
                return None
            chunk = self._recv(remaining)
            if chunk is None:
                continue
            if chunk == b"":
                out.add(bytes(window))
                self.close()
                return None
            window += chunk

    def _recv(self, timeout: float) -> bytes | None:
        """Next payload bytes from the multiplexed stream: b'' on EOF, None on timeout."""
        while True:
            payload = self._parse_frames()
            if payload:
                return payload
            ready, _, _ = select.select([self._sock], [], [], timeout)
            if not ready:
                return None
            data = self._sock.recv(1 << 20)
            if not data:
                return b""
            self._frames += data

    def _parse_frames(self) -> bytes:
        payload = bytearray()
        buf = self._frames
        pos = 0
        while len(buf) - pos >= 8:
            (size,) = struct.unpack(">I", buf[pos + 4: pos + 8])
            if len(buf) - pos - 8 < size:
                break
            payload += buf[pos + 8: pos + 8 + size]
            pos += 8 + size
        del buf[:pos]
        return bytes(payload)
