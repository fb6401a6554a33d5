"""The disk limit outside the scratch mounts: the container's writable layer is watched.

The scratch mounts (envs/sandbox/disk.py) hold `disk_limit` each, and RLIMIT_FSIZE keeps any one
file elsewhere within it; but a root agent could still write many files, each below the limit,
anywhere else (/opt, /root, /usr): all of it on the host's disk. Docker's own quota (`--storage-opt
size=`) needs btrfs, or overlay2 on xfs with project quotas, which a laptop or a CI runner rarely
has; a read-only root filesystem would make every task that installs something (`apt-get`, `pip
install`: Harbor tasks do) unsolvable, and the harness itself puts the tests there.

So the container's writable layer is measured (the daemon's `SizeRw`: the bytes of the files the
container added or changed; ~1 ms a call on overlay2) while the agent acts, before a writer at disk
speed (1 GB/s) could fill the room left: every 0.05 s near the limit, up to 0.5 s far below it. Past
`disk_limit`, every process in the container but its main one is killed (`kill_all.sh`: a writer the
agent detached from its shell goes too), the agent's shell is started afresh, and the command's next
state names the limit. The episode goes on as the agent's: deleting files makes room again. Once
over the limit, nothing may grow (the ceiling is the lowest size seen since), so a writer restarted
over the limit is stopped at the next look.

What it costs and what it lets through: one inspect call per interval per container (the daemon
walks the layer's files for it: a layer of many files is looked at less often, down to every 2 s, so
that the looks take ~5% of the daemon's time); what a writer adds within one interval and the kill's
`docker exec` lands before it is stopped: a root writer of 100 files of 4 MiB landed 109 MiB against a
16m limit on an idle machine (319 MiB with looks every 0.2 s; benchmarks/disk_ceiling.py). Where the
daemon can refuse the write itself, it does instead, and nothing is watched (envs/sandbox/quota.py).
It counts bytes, not files: empty files and directories (inodes) are not counted. While the tests
run, only the agent's own processes are killed past the limit (`Sandbox.disk_watch_kills_only`: a
non-root agent's keep running beside the tests); a root agent's are all gone by then, and the watch
stops.
"""
from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable

INTERVAL_S = 0.05  # the shortest wait between looks, for a layer near its limit
_ROOMY_WAIT_S = 0.5  # the longest, for a layer far below it
_WRITE_BPS = 1 << 30  # a fast writer (dd wrote 1.1 GB/s into a container here)
_SLACK = 1 << 20  # over the limit, a log line's growth is not yet a writer
_SHARE = 20  # the wait between looks is at least this many times what a look takes
_MAX_WAIT_S = 2.0


class DiskWatch:
    """Calls `kill()` when `size()` (bytes) goes past `limit`, or past the lowest size seen since it
    last did; `hits` counts the kills. `check()` looks once (from any thread); the background thread
    looks every `interval` s until `stop()`."""

    def __init__(self, size: Callable[[], int], kill: Callable[[], None], limit: int,
                 interval: float = INTERVAL_S):
        self._size, self._kill, self.limit, self.interval = size, kill, limit, interval
        self.hits = 0
        self.last_size = 0
        self._ceiling = limit
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="nextstate-disk-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, wait: bool = True) -> None:
        """Idempotent; with `wait`, returns once no kill is under way (one may have been, when it was
        called: grading must not start beside it)."""
        self._stopped.set()
        if wait:
            with self._lock:
                pass

    def kill_with(self, kill: Callable[[], None]) -> None:
        """From now on, past the limit `kill()` is called instead."""
        with self._lock:
            self._kill = kill

    def settled_hits(self) -> int:
        """`hits`, once no kill is under way."""
        with self._lock:
            return self.hits

    def check(self) -> bool:
        """One look; True when it killed."""
        with self._lock:
            if self._stopped.is_set():
                return False
            size = self.last_size = self._size()
            over = self._ceiling > self.limit
            if size <= self._ceiling + (_SLACK if over else 0):
                self._ceiling = max(self.limit, min(self._ceiling, size))
                return False
            self._kill()
            self.hits += 1
            self._ceiling = max(self.limit, self._size())
            return True

    def _loop(self) -> None:
        wait, took = self.interval, collections.deque([0.0, 0.0], maxlen=3)  # backs off after 3 slow looks
        while not self._stopped.wait(wait):
            t0 = time.monotonic()
            try:
                self.check()
            except Exception:  # noqa: BLE001  the container is gone or the daemon with it: exec says so
                return
            # The daemon walks the layer's files for each look: a layer that makes every look slow is
            # looked at less often (a busy daemon makes one look slow now and then: the fastest of the
            # last three counts), and never less than every _MAX_WAIT_S.
            took.append(time.monotonic() - t0)
            # The next look comes before a writer at disk speed could fill the room left (a layer far
            # below its limit is looked at less often: the CPU of a look every 0.05 s, ~4% of a core
            # per container, is spent only where the limit is near).
            room = max(0, self._ceiling - self.last_size) / _WRITE_BPS
            wait = min(_MAX_WAIT_S, max(self.interval, min(room, _ROOMY_WAIT_S), _SHARE * min(took)))
