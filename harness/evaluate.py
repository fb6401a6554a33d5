"""An eval run: every selected task once, several episodes at a time (each worker owns its env;
the model's endpoint batches their requests), trajectories streamed to disk as they finish, metrics
and a leaderboard row at the end. A run killed half-way resumes with `resume=<run_dir>`."""
from __future__ import annotations

import datetime as dt
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tqdm import tqdm

from harness.types import Task, Trajectory

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


class EnvPool:
    """One env per worker thread, created on first use, all closed at the end."""

    def __init__(self, make_env: Callable):
        self._make_env = make_env
        self._local = threading.local()
        self._all: list = []
        self._lock = threading.Lock()

    def get(self):
        env = getattr(self._local, "env", None)
        if env is None:
            env = self._local.env = self._make_env()
            if getattr(self, "max_steps", None) is not None:
                env.max_steps = self.max_steps
            with self._lock:
                self._all.append(env)
        return env

    def set_max_steps(self, n: int) -> None:
        """Change the step limit of every env (curriculum); envs made later get it too."""
        self.max_steps = n
        for env in self._all:
            env.max_steps = n

    def close(self) -> None:
        for env in self._all:
            env.close()
        self._all.clear()


def run_episodes(pool: EnvPool, make_agent: Callable, tasks: list[Task], *, system_prompt: str,
                 seed: int, parallel: int, on_done: Callable[[Trajectory], None] | None = None,
                 progress: bool = True, desc: str = "episodes") -> list[Trajectory]:
    """Run one episode per task (tasks may repeat), `parallel` at a time; results in task order.
    `make_agent(i)` makes the agent of episode i (so per-episode seeds do not depend on scheduling)."""
    results: list[Trajectory | None] = [None] * len(tasks)
    ex = ThreadPoolExecutor(max_workers=max(1, parallel), thread_name_prefix="episode")
    try:
        with tqdm(total=len(tasks), desc=desc, disable=not progress) as bar:
            futs = {ex.submit(lambda i, t: run_episode(pool.get(), make_agent(i), t, system_prompt, seed=seed), i, t): i
                    for i, t in enumerate(tasks)}
            wins = 0
            for fut in as_completed(futs):
                traj = fut.result()
                results[futs[fut]] = traj
                if on_done:
                    on_done(traj)
                wins += traj.success
                bar.update()
                bar.set_postfix(success=wins)
    except BaseException:
        # Ctrl-C / SIGTERM: drop queued episodes and return at once; the caller closes the envs
        # (removing their containers) and stops the server, which ends the running ones.
        ex.shutdown(wait=False, cancel_futures=True)
        raise
    ex.shutdown(wait=True)
    return results  # type: ignore[return-value]


def evaluate(pool: EnvPool, make_agent: Callable, tasks: list[Task], *, run_dir: Path, system_prompt: str,
             row_fields: dict, leaderboard: Path, seed: int, parallel: int = 1,
             progress: bool = True) -> EvalResult:
    run_dir.mkdir(parents=True, exist_ok=True)
    traj_file = run_dir / "trajectories.jsonl"
    done = {d["task_id"]: Trajectory.from_dict(d) for d in read_jsonl(traj_file)}
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
