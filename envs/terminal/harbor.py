"""What the terminal env needs to run Harbor-format tasks as Harbor does, beyond what both formats
share (envs/terminal/env.py): the verifier's reward files, an empty build context for a
`docker_image` task, and the per-run warnings about tasks that cannot run or fields that are not
honoured."""
from __future__ import annotations

import json
import shlex
import tempfile
import warnings
from pathlib import Path

from nextstate.types import Task

_WARNED: set[str] = set()  # warnings already given by this process: once per run, not per env or episode
_EMPTY: list[Path] = []


def fresh_reward_dir(user: str) -> str:
    """The command (run as root, just before the verifier) that makes /logs/verifier afresh: whatever
    was there goes, /logs is made root's and not writable by others (an image could have left it
    open, and an agent's process could swap in a directory of its own with a reward in it), and the
    new directory is root's, or the verifier user's when that is not root. No process of the agent
    can write it then: a root agent's are all gone, and so are the verifier user's (the env kills
    them first); any other user may only read it."""
    chown = "" if user == "root" else f" && chown {shlex.quote(user)} /logs/verifier"
    return ("rm -rf /logs/verifier && mkdir -p /logs && chown root:root /logs && chmod go-w /logs "
            "&& mkdir -m 755 /logs/verifier" + chown)


def harbor_reward(sb) -> float:
    """/logs/verifier/reward.txt (a number), else reward.json's `reward`; 0 when neither says."""
    try:
        return float(sb.download("/logs/verifier/reward.txt").decode().strip() or 0)
    except (FileNotFoundError, ValueError):
        pass
    try:
        return float(json.loads(sb.download("/logs/verifier/reward.json"))["reward"])
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return 0.0


def warn_once(message: str) -> None:
    """A warning given once per process (a run makes one env per worker, and resets it per episode)."""
    if message and message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(message, stacklevel=3)


def unhonoured_report(tasks: list[Task]) -> str:
    """One line for the task.toml fields this env cannot honour, with the tasks that set them."""
    by_field: dict[str, list[str]] = {}
    for t in tasks:
        for f in t.data.get("unhonoured", ()):
            by_field.setdefault(f, []).append(t.task_id)
    return "; ".join(f"{f} not honoured here (tasks: {', '.join(ids)})" for f, ids in sorted(by_field.items()))


def broken_report(tasks: list[Task], image_failures: dict[str, str] | None = None) -> str:
    """One warning for the tasks that cannot run (each becomes one infra-failure episode): those that
    did not load, or (given `image_failures`) those whose image could not be made."""
    if image_failures is None:
        why, what = {t.task_id: t.data["load_error"] for t in tasks if t.data.get("load_error")}, "did not load"
    else:
        ids = {t.task_id for t in tasks}
        why, what = {tid: r for tid, r in image_failures.items() if tid in ids}, "have no image"
    if not why:
        return ""
    lines = [f"  {tid}: {(reason.strip().splitlines() or [''])[0][:300]}" for tid, reason in sorted(why.items())]
    return f"{len(why)} of {len(tasks)} terminal tasks {what} (each is one infra-failure episode):\n" + "\n".join(lines)


def empty_context() -> Path:
    """A build context with nothing in it (one per process), for a task that names a docker_image."""
    if not _EMPTY:
        _EMPTY.append(Path(tempfile.mkdtemp(prefix="nextstate-empty-context-")))
    return _EMPTY[0]
