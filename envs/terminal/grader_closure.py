"""Record a terminal task's grader closure once, and keep it with its image.

The closure (envs/sandbox/closure.py) of a task is recorded the first time one of its episodes is
graded: a fresh container of the task's image runs the task's reference solution, then its verifier
under the tracer. It is kept as JSON under `env.closure_dir`, keyed by the image's id and the
content of everything that grades (the tests, their entry script, the verifier's user and
environment), so a rebuilt image or an edited test records it again. Parallel episodes of the same
task wait on a file lock for the one that records it. A closure that cannot be recorded (no strace
here, a ptrace the daemon's seccomp refuses, a task with no reference solution) leaves grading to the
toolchain list, with one warning that says why.
"""
from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import tempfile
from pathlib import Path

from envs.sandbox import SandboxError
from envs.sandbox.closure import TRACER_DIR, Closure, TracerUnavailable, parse_trace
from envs.terminal.harbor import warn_once
from nextstate.types import Task


def closure_for(env, task: Task) -> Closure | None:
    """The grader's closure of `task` in `env` (a TerminalEnv), recorded on first use; None where
    the env does not use closures (`env.grader_closure=false`, templated tasks: their checks run
    from the harness) or it could not be recorded."""
    if not env.config.grader_closure or task.data["format"] == "templated" or task.data.get("load_error"):
        return None
    memo = env.__dict__.setdefault("_closures", {})
    if task.task_id not in memo:
        memo[task.task_id] = _cached(env, task)
    return memo[task.task_id]


def _key(env, task: Task) -> str:
    image = env._docker().images.get(env.image_for(task)).id
    h = hashlib.sha256(image.encode())
    tests = Path(task.data["tests_dir"])
    for f in sorted(p for p in tests.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(tests)).encode() + b"\0" + f.read_bytes())
    if task.data.get("test_entry"):
        h.update(Path(task.data["test_entry"]).read_bytes())
    h.update(json.dumps([task.data.get("verifier_user"), task.data.get("verifier_env"), task.data.get("run_as"),
                         env.sandbox_config.workdir], sort_keys=True, default=str).encode())
    return h.hexdigest()[:24]


def _cached(env, task: Task) -> Closure | None:
    try:
        key = _key(env, task)
    except (SandboxError, OSError) as e:
        warn_once(f"grader closure of {task.task_id}: not recorded ({e}); graded with the toolchain list")
        return None
    root = Path(env.config.closure_dir).expanduser()
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{task.task_id}-{key}.json"
    with open(root / f".{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one recording per task, however many episodes grade it
        if path.exists():
            return Closure.from_json(path.read_text())
        try:
            closure = record(env, task)
        except (TracerUnavailable, SandboxError, OSError) as e:
            warn_once(f"grader closure of {task.task_id}: not recorded ({e}); graded with the toolchain list")
            return None
        fd, tmp = tempfile.mkstemp(dir=root, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(closure.to_json())
        os.replace(tmp, path)
        return closure


def _link_targets(sb, closure: Closure) -> list[str]:
    """Where the closure's paths lead in the container (`readlink -e`: every symlink on the way
    resolved), so that the file behind /usr/lib/python3.11/sitecustomize.py (in /etc) is in it too."""
    listing = "\n".join(sorted(closure.files)).encode()
    sb.upload_files({f"{TRACER_DIR}/paths": listing})
    code, out = sb.run(f"xargs -d '\\n' -a {TRACER_DIR}/paths readlink -e 2>/dev/null; true", timeout=120)
    return [line for line in out.splitlines() if line.startswith("/")]


def record(env, task: Task) -> Closure:
    """Run `task`'s reference solution, then its verifier under the tracer, in a fresh container
    of its image; the closure is what the verifier touched, less what the solution changed."""
    tracer = type(env)(dataclasses.replace(env.config, grader_closure=False), env.sandbox_config,
                       tasks=[task], run_id=env.run_id)  # (its class: this module is below envs.terminal.env)
    tracer.trace_verifier = True
    try:
        _, info = tracer.reset(options={"task_id": task.task_id})
        if info.get("infra_failure"):
            raise SandboxError(info["infra_reason"])
        replies = tracer.reference_actions(task)
        if replies == [env.config.done_token]:
            raise SandboxError("the task has no reference solution to record it after")
        done = False
        for reply in replies[:-1]:
            *_, done, _, info = tracer.step(reply)
            if done:
                break
        solution_changes = tracer._sandbox.changes()
        if not done:
            *_, info = tracer.step(replies[-1])
        if info.get("infra_failure"):
            raise SandboxError(info["infra_reason"])
        if not info.get("success"):
            warn_once(f"grader closure of {task.task_id}: its reference solution did not pass "
                      f"({info.get('test_output', '')[-200:]!r}); the closure is what the failing run touched")
        if tracer.trace_log is None:
            raise SandboxError("the verifier left no trace")
        scratch = (tracer._sandbox.config.workdir, "/tmp", "/var/tmp", "/home", "/solution")
        closure = parse_trace(tracer.trace_log, ignored=scratch)
        return closure.plus(_link_targets(tracer._sandbox, closure), ignored=scratch).without(solution_changes)
    finally:
        tracer.close()
