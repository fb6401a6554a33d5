import os, time
from pathlib import Path

def worker_pids():
    """Processes running worker.sh, not counting the worker's own subshells: its `$(date +%s)` is a
    fork of it, with the same command line, for a moment each second."""
    found = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                cmd = (p / "cmdline").read_bytes().split(b"\0")
                ppid = int((p / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if any(c.endswith(b"worker.sh") for c in cmd):
                found[int(p.name)] = ppid
    return [pid for pid, ppid in found.items() if ppid not in found]

def test_pid_file_points_at_running_worker():
    pid = int(Path("/app/worker.pid").read_text().strip())
    assert os.path.exists(f"/proc/{pid}"), "process not running"
    cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    assert b"worker.sh" in cmd
    assert worker_pids() == [pid]

def test_heartbeats_continue():
    log = Path("/app/heartbeat.log")
    assert log.is_file()
    before = len(log.read_text().splitlines())
    time.sleep(2.5)
    assert len(log.read_text().splitlines()) > before
