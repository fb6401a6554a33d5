"""An eval run: every selected task once, trajectories streamed to disk, metrics and a leaderboard
row at the end. A run killed half-way resumes with `resume=<run_dir>` and skips finished tasks."""
from __future__ import annotations

import datetime as dt
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from harness.types import Trajectory

from .atomic import append_jsonl, read_jsonl, write_json_atomic
from .leaderboard import append_row
from .rollout import run_episode


@dataclass
class EvalResult:
    trajectories: list[Trajectory]
    metrics: dict
    row: dict


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, timeout=5).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def summarize(trajs: list[Trajectory]) -> dict:
    graded = [t for t in trajs if not t.infra_failure]
    n = len(graded)
    return {
        "n_tasks": len(trajs),
        "n_graded": n,
        "success_rate": (sum(t.success for t in graded) / n) if n else 0.0,
        "mean_outcome": (sum(t.outcome for t in graded) / n) if n else 0.0,
        "mean_steps": (sum(len(t.steps) for t in graded) / n) if n else 0.0,
        "infra_failures": len(trajs) - n,
        "tokens": sum(t.n_tokens for t in trajs),
        "per_task": {t.task_id: {"success": t.success, "outcome": t.outcome, "steps": len(t.steps),
                                 "infra_failure": t.infra_failure} for t in trajs},
    }


def evaluate(env, agent, tasks, *, run_dir: Path, system_prompt: str, row_fields: dict,
             leaderboard: Path, seed: int, progress: bool = True) -> EvalResult:
    run_dir.mkdir(parents=True, exist_ok=True)
    traj_file = run_dir / "trajectories.jsonl"
    done = {d["task_id"]: Trajectory.from_dict(d) for d in read_jsonl(traj_file)}
    todo = [t for t in tasks if t.task_id not in done]
    t0 = time.monotonic()
    if hasattr(env.unwrapped, "prepare") and todo:
        with tqdm(total=len(todo), desc="images", disable=not progress, leave=False) as bar:
            env.unwrapped.prepare(todo, progress=lambda _t: bar.update())
    with tqdm(total=len(tasks), initial=len(tasks) - len(todo), desc=f"{row_fields['env']}/{row_fields['agent']}",
              disable=not progress) as bar:
        for task in todo:
            traj = run_episode(env, agent, task, system_prompt, seed=seed)
            append_jsonl(traj_file, traj.to_dict())
            done[task.task_id] = traj
            bar.update()
            bar.set_postfix(success=sum(t.success for t in done.values()))
    trajs = [done[t.task_id] for t in tasks]
    metrics = summarize(trajs)
    metrics["wall_s"] = time.monotonic() - t0
    write_json_atomic(run_dir / "metrics.json", metrics)
    row = {
        "timestamp": dt.datetime.now().isoformat(timespec="seconds"), **row_fields, "seed": seed,
        "n_tasks": metrics["n_tasks"], "success_rate": round(metrics["success_rate"], 4),
        "mean_steps": round(metrics["mean_steps"], 2), "infra_failures": metrics["infra_failures"],
        "tokens": metrics["tokens"], "wall_s": round(metrics["wall_s"], 1), "run_dir": str(run_dir),
        "git_commit": git_commit(),
    }
    append_row(leaderboard, row)
    return EvalResult(trajs, metrics, row)
