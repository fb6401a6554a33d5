"""Loading SWE-bench instances from what a user has: a JSON / JSONL / parquet export (SWE-bench,
SWE-Gym, our bundled suite) or a swebench 5.x task repo (`tasks/<instance_id>/...`).

Every instance becomes a `Task` whose `data["instance"]` is the instance dict with the fields
swebench 5.x grades by (`image`, `eval_script`, `log_parser`, `eval_type`, F2P/P2P as lists), and
`data["build"]` says how to make its image here: from a git bundle of the repo (our suite), from
the task repo's Dockerfile, or nothing (the image must already be loaded under `image`).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nextstate.types import Task

# What a SWE-bench instance has, and what swebench 5.x needs on top to grade it.
CORE_FIELDS = ("repo", "instance_id", "base_commit", "patch", "test_patch", "problem_statement",
               "FAIL_TO_PASS", "PASS_TO_PASS")
GRADING_FIELDS = ("image", "eval_script", "log_parser", "eval_type")


class SWEInstanceError(ValueError):
    """An instance file that cannot be read, or an instance that misses what grading needs."""


def read_instances(source: Path | str) -> list[dict[str, Any]]:
    """The raw instance dicts in `source` (.json, .jsonl, .parquet, or a swebench task repo)."""
    source = Path(source)
    if source.is_dir():
        if not (source / "tasks").is_dir():
            raise SWEInstanceError(f"{source}: a directory must be a swebench task repo (tasks/<id>/)")
        from swebench.task.repo import load_task_repo  # swebench's own reader of its format

        return [dict(inst, _task_dir=str(source / "tasks" / inst["instance_id"]))
                for inst in load_task_repo(source)]
    if not source.is_file():
        raise SWEInstanceError(f"SWE instances: {source} does not exist")
    suffix = source.suffix.lower()
    try:
        if suffix == ".jsonl":
            return [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
        if suffix == ".json":
            data = json.loads(source.read_text())
            return list(data.values()) if isinstance(data, dict) else list(data)
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            return pq.read_table(source).to_pylist()
    except (json.JSONDecodeError, OSError, ValueError) as e:
        raise SWEInstanceError(f"{source}: cannot read instances: {e}") from e
    raise SWEInstanceError(f"{source}: expected .json, .jsonl, .parquet or a task repo directory")


def normalize(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """The instance with F2P/P2P as lists (exports often store them as JSON strings) and every
    field grading needs checked; a missing one is named, with what to do about it."""
    inst = {k: v for k, v in raw.items() if not k.startswith("_")}
    iid = inst.get("instance_id", "?")
    missing = [f for f in CORE_FIELDS if inst.get(f) is None]
    if missing:
        raise SWEInstanceError(f"{where}: instance {iid} has no {', '.join(missing)}")
    for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        if isinstance(inst[key], str):
            inst[key] = json.loads(inst[key]) if inst[key].strip() else []
        inst[key] = [str(t) for t in inst[key]]
    missing = [f for f in GRADING_FIELDS if not inst.get(f)]
    if missing:
        raise SWEInstanceError(
            f"{where}: instance {iid} has no {', '.join(missing)}: grading needs the swebench 5.x "
            "fields (image, eval_script, log_parser, eval_type); use a swebench 5.x export or task repo")
    for key in ("hints_text", "version", "environment_setup_commit", "created_at"):
        inst[key] = "" if inst.get(key) is None else str(inst[key])
    return inst


def build_recipe(raw: dict[str, Any], source: Path) -> dict[str, str] | None:
    """How to build the instance's image here, or None when it has to be loaded already."""
    if raw.get("repo_bundle"):  # our format: the repo at base_commit as a git bundle
        bundle = Path(raw["repo_bundle"])
        bundle = bundle if bundle.is_absolute() else source.parent / bundle
        if not bundle.is_file():
            raise SWEInstanceError(f"{source}: {raw['instance_id']}: no bundle at {bundle}")
        return {"kind": "bundle", "bundle": str(bundle)}
    task_dir = raw.get("_task_dir")
    if task_dir and (Path(task_dir) / "Dockerfile").is_file():  # a swebench task repo
        return {"kind": "dockerfile", "context": task_dir, "dockerfile": "Dockerfile"}
    return None


def to_task(raw: dict[str, Any], source: Path, env: str = "swe", default_split: str = "test") -> Task:
    inst = normalize(raw, str(source))
    split = raw.get("split") if raw.get("split") in ("train", "test") else default_split
    return Task(
        task_id=inst["instance_id"], env=env, instruction=inst["problem_statement"].strip(),
        split=split, difficulty=str(raw.get("difficulty", "medium")), tags=(inst["repo"],),
        path=source, data={"instance": inst, "build": build_recipe(raw, source)},
    )


def load_swe_suite(source: Path | str, split: str | None = None, env: str = "swe",
                   default_split: str = "test") -> list[Task]:
    """Every instance in `source` as a Task, in file order; optionally one split only
    (instances without a `split` field belong to `default_split`)."""
    source = Path(source)
    tasks = [to_task(raw, source, env, default_split) for raw in read_instances(source)]
    ids = [t.task_id for t in tasks]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise SWEInstanceError(f"{source}: duplicate instance ids {dup}")
    if split not in (None, "all"):
        tasks = [t for t in tasks if t.split == split]
    return tasks
