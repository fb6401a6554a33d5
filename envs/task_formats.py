"""Loaders for terminal task directories in the two public formats:

- Terminal-Bench 1.x: `task.yaml` (instruction, difficulty, tags ...), `Dockerfile`, `run-tests.sh`,
  `tests/`, `solution.sh`. Passing = run-tests.sh exits 0.
- Harbor: `instruction.md`, `task.toml`, `environment/Dockerfile`, `tests/test.sh` (writes a reward to
  /logs/verifier/reward.txt), `solution/solve.sh`. Passing = reward >= 1.

Both become the same `Task`; `task.data` says how to build, grade and solve it.
"""
from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

import yaml

from nextstate.config import ConfigError
from nextstate.types import Task

_TEMPLATE = re.compile(r"\$\{([^}]+)\}")


class TaskFormatError(ConfigError):
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
        split=meta.get("split", "test"), difficulty=str(meta.get("difficulty", "medium")),
        tags=tuple(tags), path=d,
        data={
            "format": "terminal-bench", "build_context": str(d), "dockerfile": "Dockerfile",
            "tests_dir": str(d / "tests"), "test_entry": str(d / "run-tests.sh"),
            "solution": str(d / "solution.sh") if (d / "solution.sh").exists() else None,
            "run_as": meta.get("run_as"), "split_declared": "split" in meta,
            "agent_timeout_s": float(meta.get("max_agent_timeout_sec", 600)),
            "test_timeout_s": float(meta.get("max_test_timeout_sec", 120)),
        },
    )


# Harbor task.toml fields this env cannot honour: reported once per run (TerminalEnv), never dropped
# silently. The sandbox has no network and no GPUs; healthchecks and MCP servers are not run.
# (`storage_mb` / `storage` is the episode's sandbox.disk_limit: see TerminalEnv._limits_for.)
_UNHONOURED = ("gpus", "healthcheck", "mcp_servers")


def _size_mb(envc: dict, key: str) -> int | None:
    """`<key>_mb` (an int), else `<key>` ("2G", "512M", or bytes), in MiB."""
    if envc.get(f"{key}_mb"):
        return int(envc[f"{key}_mb"])
    text = str(envc.get(key) or "").strip().upper().removesuffix("B")
    if not text:
        return None
    units = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}
    try:
        return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text) // (1 << 20)
    except ValueError as e:
        raise TaskFormatError(f"environment.{key} {envc[key]!r} is not a size") from e


def _env_table(meta: dict, section: str, where: Path) -> dict[str, str]:
    """`[section].env`, with Harbor's `${VAR}` / `${VAR:-default}` read from this process's environment."""
    table = (meta.get(section) or {}).get("env") or {}
    if not isinstance(table, dict):
        raise TaskFormatError(f"{where}: [{section}].env is not a table")

    def resolve(m: re.Match) -> str:
        name, _, default = m.group(1).partition(":-")
        return os.environ.get(name, default)

    return {str(k): _TEMPLATE.sub(resolve, str(v)) for k, v in table.items()}


def load_harbor(d: Path, env: str) -> Task:
    toml_path = _require(d / "task.toml", "task.toml")
    try:
        meta = tomllib.loads(toml_path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise TaskFormatError(f"{toml_path}: invalid TOML: {e}") from e
    if (d / "steps").is_dir() or meta.get("steps"):
        raise TaskFormatError(f"{d}: a multi-step Harbor task (steps/); only single-step tasks are supported")
    instruction = _require(d / "instruction.md", "instruction.md").read_text().strip()
    envc, agent, verifier = (meta.get(k) or {} for k in ("environment", "agent", "verifier"))
    docker_image = envc.get("docker_image")
    if not docker_image:
        _require(d / "environment" / "Dockerfile", "environment/Dockerfile")
    _require(d / "tests" / "test.sh", "tests/test.sh")
    md = meta.get("metadata", {})
    tags = list(md.get("tags") or [])
    if md.get("category"):
        tags.insert(0, str(md["category"]))
    solve = d / "solution" / "solve.sh"
    unhonoured = [f"environment.{k}" for k in _UNHONOURED if envc.get(k)]
    if envc.get("allow_internet"):
        unhonoured.append("environment.allow_internet (the sandbox has no network)")
    if (d / "environment" / "docker-compose.yaml").exists():
        unhonoured.append("environment/docker-compose.yaml (one container only)")
    return Task(
        task_id=d.name, env=env, instruction=instruction, split=md.get("split", "test"),
        difficulty=str(md.get("difficulty", "medium")), tags=tuple(tags), path=d,
        data={
            "format": "harbor", "build_context": str(d / "environment"), "dockerfile": "Dockerfile",
            "docker_image": docker_image, "split_declared": "split" in md,
            "tests_dir": str(d / "tests"), "test_entry": None,
            "solution": str(solve) if solve.exists() else None, "solution_dir": str(d / "solution"),
            "run_as": agent.get("user"),  # None: the image's own user, as Harbor runs it
            "verifier_user": verifier.get("user") or "root",
            "workdir": envc.get("workdir"), "env": _env_table(meta, "environment", toml_path),
            "verifier_env": _env_table(meta, "verifier", toml_path),
            "solution_env": _env_table(meta, "solution", toml_path),
            "cpus": float(envc["cpus"]) if envc.get("cpus") else None, "memory_mb": _size_mb(envc, "memory"),
            "storage_mb": _size_mb(envc, "storage"),
            "unhonoured": unhonoured,
            "agent_timeout_s": float(agent.get("timeout_sec", 600)),
            "test_timeout_s": float(verifier.get("timeout_sec", 120)),
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
    """Every task directory under `root`, sorted by id, optionally one split only. A task that
    declares no split is in every split. A directory that does not load is kept as a task whose
    `data["load_error"]` says why (the env makes it one infra-failure episode), so one bad task does
    not stop the suite."""
    root = Path(root)
    if not root.is_dir():
        raise TaskFormatError(f"env.tasks_dir={root}: the task suite does not exist")
    tasks = []
    for d in sorted(root.iterdir()):
        if not (d.is_dir() and ((d / "task.yaml").exists() or (d / "task.toml").exists())):
            continue
        try:
            tasks.append(load_task_dir(d, env))
        except (TaskFormatError, OSError, UnicodeDecodeError, TypeError, ValueError) as e:
            tasks.append(Task(task_id=d.name, env=env, instruction="", split="test", path=d,
                              data={"format": "invalid", "load_error": f"{type(e).__name__}: {e}",
                                    "split_declared": False}))
    if not tasks:
        raise TaskFormatError(f"env.tasks_dir={root}: no task in it (a task is a dir with a task.toml or task.yaml)")
    if split not in (None, "all"):
        tasks = [t for t in tasks if t.split == split or not t.data.get("split_declared", True)]
    return tasks
