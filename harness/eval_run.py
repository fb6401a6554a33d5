"""mode=eval: the configured agent on the split's tasks; a leaderboard row at the end."""
from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from agents.factory import agent_factory, serve_policy
from agents.pool import EnvPool
from envs.make import env_maker
from envs.sandbox import wait_for_background_removals
from harness.evaluate import GradedNothing, evaluate
from harness.reports.console import print_summary
from nextstate.config import suite_of
from trainers.curriculum import without_tags
from trainers.job import Job


@dataclass
class EvalConfig:
    """conf/mode/eval.yaml: mode=eval reads the top-level keys (split, limit, agent)."""

    name: str


def select_tasks(env, limit: int | None, exclude_tags=None):
    """The env's tasks (already narrowed to the split it was made with), less excluded tags, first `limit`."""
    tasks = without_tags(env.unwrapped.tasks, exclude_tags)
    return tasks[:limit] if limit else tasks


def eval_main(job: Job, run_dir: Path) -> dict:
    """mode=eval: the agent on the split's tasks, one leaderboard row."""
    split = None if job.split == "all" else job.split
    make_env, env_cfg = env_maker(job.env, job.sandbox, run_dir, split)
    pool = EnvPool(make_env)
    with ExitStack() as stack:
        stack.callback(wait_for_background_removals)
        stack.callback(pool.close)
        policy = None
        if job.agent.get("served"):
            policy = stack.enter_context(serve_policy(job.model, job.backend, job.paths.cache_dir,
                                                      log_path=run_dir / "server.log"))
        tasks = select_tasks(pool.get(), job.limit, job.exclude_tags)
        make_agent = agent_factory(job.agent, policy)
        result = evaluate(
            pool, make_agent, tasks, run_dir=run_dir,
            system_prompt=env_cfg.system_prompt, seed=job.seed, parallel=job.parallel,
            leaderboard=Path(job.paths.results_dir) / "leaderboard.csv", progress=job.progress,
            row_fields={"env": env_cfg.name, "suite": suite_of(env_cfg), "split": job.split,
                        "agent": job.agent["name"],
                        "model": job.model.name if policy else (job.agent.get("model") or "-"),
                        "signal": "none"},
        )
    print_summary(result)
    if not result.filed:
        raise GradedNothing(result)
    return result.metrics
