"""Loaders for terminal task directories in the two public formats:

- Terminal-Bench 1.x: `task.yaml` (instruction, difficulty, tags ...), `Dockerfile`, `run-tests.sh`,
  `tests/`, `solution.sh`. Passing = run-tests.sh exits 0.
- Harbor: `instruction.md`, `task.toml`, `environment/Dockerfile`, `tests/test.sh` (writes a reward to
  /logs/verifier/reward.txt), `solution/solve.sh`. Passing = reward >= 1.

Both become the same `Task`; `task.data` says how to build, grade and solve it.
"""
from __future__ import annotations

import tomllib
from pathlib import Path

import yaml

from nextstate.types import Task


class TaskFormatError(ValueError):
    """A task directory that is neither format, or misses a required file."""


def _require(path: Path, what: str) -> Path:
    if not path.exists():
        raise TaskFormatError(f"{path.parent}: missing {what} ({path.name})")
    return path


def load_terminal_bench(d: Path, env: str) -> Task:
    try:
        meta = yaml.safe_load(_require(d / "task.yaml", "task.yaml").read_text()) or {}
    except yaml.YAMLError as e:
        raise TaskFormatError(f"{d / 'task.yaml'}: invalid YAML: {e}") from e
    if "instruction" not in meta:
        raise TaskFormatError(f"{d / 'task.yaml'}: no `instruction`")
    _require(d / "Dockerfile", "Dockerfile")
    _require(d / "run-tests.sh", "the test runner")
    tags = list(meta.get("tags") or [])
    if meta.get("category"):
        tags.insert(0, str(meta["category"]))
    return Task(
        task_id=d.name, env=env, instruction=str(meta["instruction"]).strip(),
        split=meta.get("split", "train"), difficulty=str(meta.get("difficulty", "medium")),
        tags=tuple(tags), path=d,
        data={
            "format": "terminal-bench", "build_context": str(d), "dockerfile": "Dockerfile",
            "tests_dir": str(d / "tests"), "test_entry": str(d / "run-tests.sh"),
            "solution": str(d / "solution.sh") if (d / "solution.sh").exists() else None,
            "run_as": meta.get("run_as"),
            "agent_timeout_s": float(meta.get("max_agent_timeout_sec", 600)),
            "test_timeout_s": float(meta.get("max_test_timeout_sec", 120)),
        },
    )


def load_harbor(d: Path, env: str) -> Task:
    try:
        meta = tomllib.loads(_require(d / "task.toml", "task.toml").read_text())
    except tomllib.TOMLDecodeError as e:
        raise TaskFormatError(f"{d / 'task.toml'}: invalid TOML: {e}") from e
    instruction = _require(d / "instruction.md", "instruction.md").read_text().strip()
    _require(d / "environment" / "Dockerfile", "environment/Dockerfile")
    _require(d / "tests" / "test.sh", "tests/test.sh")
    md = meta.get("metadata", {})
    tags = list(md.get("tags") or [])
    if md.get("category"):
        tags.insert(0, str(md["category"]))
    solve = d / "solution" / "solve.sh"
    return Task(
        task_id=d.name, env=env, instruction=instruction, split=md.get("split", "train"),
        difficulty=str(md.get("difficulty", "medium")), tags=tuple(tags), path=d,
        data={
            "format": "harbor", "build_context": str(d / "environment"), "dockerfile": "Dockerfile",
            "tests_dir": str(d / "tests"), "test_entry": None,
            "solution": str(solve) if solve.exists() else None, "run_as": md.get("run_as"),
            "agent_timeout_s": float(meta.get("agent", {}).get("timeout_sec", 600)),
            "test_timeout_s": float(meta.get("verifier", {}).get("timeout_sec", 120)),
        },
    )


def load_task_dir(d: Path, env: str = "terminal") -> Task:
    d = Path(d)
    if (d / "task.yaml").exists():
        return load_terminal_bench(d, env)
    if (d / "task.toml").exists():
        return load_harbor(d, env)
    raise TaskFormatError(f"{d}: neither a Terminal-Bench (task.yaml) nor a Harbor (task.toml) task")


def load_suite(root: Path | str, env: str = "terminal", split: str | None = None) -> list[Task]:
    """Every task directory under `root`, sorted by id, optionally one split only."""
    root = Path(root)
    if not root.is_dir():
        raise TaskFormatError(f"task suite {root} does not exist")
    tasks = [load_task_dir(d, env) for d in sorted(root.iterdir())
             if d.is_dir() and ((d / "task.yaml").exists() or (d / "task.toml").exists())]
    if split not in (None, "all"):
        tasks = [t for t in tasks if t.split == split]
    return tasks
