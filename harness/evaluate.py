"""An eval run: every selected task once, several episodes at a time (each worker owns its env;
the model's endpoint batches their requests), trajectories streamed to disk as they finish, metrics
and a leaderboard row at the end. A run killed half-way resumes with `resume=<run_dir>`: a torn last
trajectory line (killed mid-write) is dropped with a warning and its episode run again, and metrics and
row are committed so that a kill between them leaves a row `resume=` files once (nextstate.leaderboard
`commit_run`)."""
from __future__ import annotations

import datetime as dt
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tqdm import tqdm

from agents.pool import EnvPool, run_episodes, summarize
from nextstate.atomic import append_jsonl, drop_torn_tail, read_jsonl
from nextstate.leaderboard import commit_run, git_commit
from nextstate.types import Task, Trajectory


@dataclass
class EvalResult:
    trajectories: list[Trajectory]
    metrics: dict
    row: dict
    filed: bool = True  # False: nothing was graded, so the row was not filed


def evaluate(pool: EnvPool, make_agent: Callable, tasks: list[Task], *, run_dir: Path, system_prompt: str,
             row_fields: dict, leaderboard: Path, seed: int, parallel: int = 1,
             progress: bool = True) -> EvalResult:
    run_dir.mkdir(parents=True, exist_ok=True)
    traj_file = run_dir / "trajectories.jsonl"
    drop_torn_tail(traj_file)  # a record cut by a kill: dropped (with a warning), its episode run again
    # an infra failure is no result: a resumed run plays that episode again (the later record wins)
    done = {d["task_id"]: Trajectory.from_dict(d) for d in read_jsonl(traj_file) if not d.get("infra_failure")}
    todo = [t for t in tasks if t.task_id not in done]
    t0 = time.monotonic()
    first = pool.get()
    if hasattr(first.unwrapped, "prepare") and todo:
        with tqdm(total=len(todo), desc="prepare", disable=not progress, leave=False) as bar:
            first.unwrapped.prepare(todo, progress=lambda _t: bar.update())
    lock = threading.Lock()

    def save(traj: Trajectory) -> None:
        with lock:
            append_jsonl(traj_file, traj.to_dict())
            done[traj.task_id] = traj

    run_episodes(pool, make_agent, todo, system_prompt=system_prompt, seed=seed, parallel=parallel,
                 on_done=save, progress=progress, desc=f"{row_fields['env']}/{row_fields['agent']}")
    trajs = [done[t.task_id] for t in tasks]
    metrics = summarize(trajs)
    metrics["wall_s"] = time.monotonic() - t0
    row = {
        "timestamp": dt.datetime.now().isoformat(timespec="seconds"), **row_fields, "seed": seed,
        "n_tasks": metrics["n_tasks"], "success_rate": round(metrics["success_rate"], 4),
        "mean_steps": round(metrics["mean_steps"], 2), "infra_failures": metrics["infra_failures"],
        "tokens": metrics["tokens"], "wall_s": round(metrics["wall_s"], 1), "run_dir": str(run_dir),
        "git_commit": git_commit(),
    }
    if trajs and not metrics["n_graded"]:  # nothing was scored: a 0% row would rank as a result, and
        return EvalResult(trajs, metrics, row, filed=False)  # no metrics.json: `resume=` runs the episodes again
    commit_run(run_dir, metrics, leaderboard, row)
    return EvalResult(trajs, metrics, row)


class GradedNothing(SystemExit):
    """Every episode of the run was an infra failure: no score exists, so the run files no row and
    the command exits non-zero, naming the first reason."""

    def __init__(self, result: EvalResult):
        reason = next((t.infra_reason for t in result.trajectories if t.infra_reason), "unknown")
        super().__init__(f"[nextstate] graded nothing: all {len(result.trajectories)} episodes were infra "
                         f"failures, so no leaderboard row was filed. First reason: {reason.strip()[:500]}")
