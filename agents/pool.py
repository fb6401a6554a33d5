"""Many episodes at once: envs made as needed and reused (`EnvPool`), `parallel` episodes in flight (the
model's endpoint batches their requests), results in task order, and the summary every mode reports."""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from typing import Callable

from tqdm import tqdm

from agents.rollout import run_episode
from nextstate.types import Task, Trajectory


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
        # graded, but say why a score may not be the solution's: counted apart in the report
        "tampered": sum(bool(t.info.get("tampered")) for t in graded),
        "verifier_timeouts": sum(bool(t.info.get("verifier_timed_out")) for t in graded),
        "suspicious": sum(bool(t.info.get("suspicious")) for t in graded),
        "tokens": sum(t.n_tokens for t in trajs),
        "per_task": {t.task_id: {"success": t.success, "outcome": t.outcome, "steps": len(t.steps),
                                 "infra_failure": t.infra_failure} for t in trajs},
    }


class EnvPool:
    """Envs made when an episode needs one and reused by every later one, all closed at the end: a
    run holds as many envs (each with its Docker client, and a container while an episode runs) as it
    runs episodes at once, however many batches it runs."""

    def __init__(self, make_env: Callable):
        self._make_env = make_env
        self._all: list = []
        self._idle: list = []
        self._lock = threading.Lock()
        self._closed = False

    def _made(self):
        if self._closed:  # a worker thread still running when the run stopped
            raise RuntimeError("the env pool is closed: the run is stopping")
        env = self._make_env()
        if getattr(self, "max_steps", None) is not None:
            env.max_steps = self.max_steps
        with self._lock:
            self._all.append(env)
        return env

    def get(self):
        """The first env (made if there is none): for reading the suite (tasks, tools, references), or
        for episodes run one at a time."""
        with self._lock:
            first = self._all[0] if self._all else None
        if first is None:
            first = self._made()
            with self._lock:
                self._idle.append(first)
        return first

    @contextmanager
    def checkout(self):
        """An env no other episode is using, given back when the episode ends."""
        with self._lock:
            env = self._idle.pop() if self._idle else None
        env = env if env is not None else self._made()
        try:
            yield env
        finally:
            with self._lock:
                closed = self._closed
                if not closed:
                    self._idle.append(env)
            if closed:  # the pool closed during this episode, which may have started a container since
                env.close()

    def set_max_steps(self, n: int) -> None:
        """Change the step limit of every env (curriculum); envs made later get it too."""
        self.max_steps = n
        for env in self._all:
            env.max_steps = n

    def close(self) -> None:
        """Close every env; an env still in an episode (a worker thread after Ctrl-C / SIGTERM) is closed
        again when its episode ends, and no env is made from now on."""
        with self._lock:
            self._closed = True
        for env in self._all:
            env.close()
        self._all.clear()
        self._idle.clear()


def _episode(pool: EnvPool, agent, task: Task, system_prompt: str, seed: int, on_step) -> Trajectory:
    with pool.checkout() as env:
        return run_episode(env, agent, task, system_prompt, seed=seed, on_step=on_step)


def run_episodes(pool: EnvPool, make_agent: Callable, tasks: list[Task], *, system_prompt: str,
                 seed: int, parallel: int, on_done: Callable[[Trajectory], None] | None = None,
                 progress: bool = True, desc: str = "episodes") -> list[Trajectory]:
    """Run one episode per task (tasks may repeat), `parallel` at a time; results in task order.
    `make_agent(i)` makes the agent of episode i (so per-episode seeds do not depend on scheduling)."""
    results: list[Trajectory | None] = [None] * len(tasks)
    ex = ThreadPoolExecutor(max_workers=max(1, parallel), thread_name_prefix="episode")
    try:
        with tqdm(total=len(tasks), desc=desc, disable=not progress) as bar:
            # steps and tokens move with every step, so a bar whose episodes all end late still moves
            live = {"steps": 0, "tokens": 0, "success": 0}
            lock = threading.Lock()

            def stepped(n_tokens: int) -> None:
                with lock:
                    live["steps"] += 1
                    live["tokens"] += n_tokens
                    bar.set_postfix(live, refresh=True)

            futs = {ex.submit(lambda i, t: _episode(pool, make_agent(i), t, system_prompt, seed,
                                                    stepped if progress else None), i, t): i
                    for i, t in enumerate(tasks)}
            for fut in as_completed(futs):
                traj = fut.result()
                results[futs[fut]] = traj
                if on_done:
                    on_done(traj)
                with lock:
                    live["success"] += traj.success
                    bar.update()
                    bar.set_postfix(live)
    except BaseException:
        # Ctrl-C / SIGTERM: drop queued episodes and return at once; the caller closes the envs
        # (removing their containers) and stops the server, which ends the running ones.
        ex.shutdown(wait=False, cancel_futures=True)
        raise
    ex.shutdown(wait=True)
    return results  # type: ignore[return-value]
