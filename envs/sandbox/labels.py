"""Container labels that name the run and the process that owns it, and the reaper that removes
containers of runs whose process is gone (a `kill -9` leaves containers behind; the next start
cleans them up)."""
from __future__ import annotations

import os
import socket

RUN_LABEL = "nextstate.run"
PID_LABEL = "nextstate.pid"
START_LABEL = "nextstate.pid_start"
HOST_LABEL = "nextstate.host"


def _process_start_time(pid: int) -> str | None:
    """The kernel's start time of `pid` (guards against a reused pid). None if not running."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def run_labels(run_id: str) -> dict[str, str]:
    pid = os.getpid()
    return {RUN_LABEL: run_id, PID_LABEL: str(pid), START_LABEL: _process_start_time(pid) or "",
            HOST_LABEL: socket.gethostname()}


def owner_alive(labels: dict[str, str]) -> bool:
    if labels.get(HOST_LABEL) != socket.gethostname():
        return True  # another machine's container on a shared daemon: not ours to judge
    try:
        pid = int(labels.get(PID_LABEL, ""))
    except ValueError:
        return False
    start = _process_start_time(pid)
    return start is not None and start == labels.get(START_LABEL)


def reap_orphans(client) -> list[str]:
    """Remove every NextState container whose owning process is no longer alive."""
    removed = []
    for c in client.containers.list(all=True, filters={"label": RUN_LABEL}):
        if not owner_alive(c.labels):
            try:
                c.remove(force=True)
                removed.append(c.labels.get(RUN_LABEL, c.id[:12]))
            except Exception:  # already gone
                pass
    return removed
