"""mode=eval: the configured agent on the split's tasks; a leaderboard row at the end."""
from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from agents.factory import agent_factory, serve_policy
from agents.pool import EnvPool
from agents.serving.backend import BackendConfig
from envs.make import env_maker
from envs.sandbox import wait_for_background_removals
from harness.evaluate import GradedNothing, evaluate
from harness.reports.console import print_summary
from nextstate.config import model_config, suite_of, typed
from trainers.curriculum import without_tags


def select_tasks(env, limit: int | None, exclude_tags=None):
    """The env's tasks (already narrowed to the split it was made with), less excluded tags, first `limit`."""
    tasks = without_tags(env.unwrapped.tasks, exclude_tags)
    return tasks[:limit] if limit else tasks


def eval_main(cfg: DictConfig, run_dir: Path) -> dict:
    """mode=eval: the agent on the split's tasks, one leaderboard row."""
    split = None if cfg.split == "all" else cfg.split
    make_env, env_cfg = env_maker(cfg, run_dir, split)
    pool = EnvPool(make_env)
    model_cfg = model_config(cfg.model)
    with ExitStack() as stack:
        stack.callback(wait_for_background_removals)
        stack.callback(pool.close)
        policy = None
        if cfg.agent.get("served"):
            policy = stack.enter_context(serve_policy(model_cfg, typed(cfg.backend, BackendConfig),
                                                      cfg.paths.cache_dir, log_path=run_dir / "server.log"))
        tasks = select_tasks(pool.get(), cfg.limit, cfg.get("exclude_tags"))
        make_agent = agent_factory(OmegaConf.to_container(cfg.agent, resolve=True), policy)
        result = evaluate(
            pool, make_agent, tasks, run_dir=run_dir,
            system_prompt=env_cfg.system_prompt, seed=cfg.seed, parallel=cfg.parallel,
            leaderboard=Path(cfg.paths.results_dir) / "leaderboard.csv", progress=cfg.progress,
            row_fields={"env": env_cfg.name, "suite": suite_of(env_cfg), "split": cfg.split,
                        "agent": cfg.agent.name,
                        "model": model_cfg.name if policy else (cfg.agent.get("model") or "-"),
                        "signal": "none"},
        )
    print_summary(result)
    if not result.filed:
        raise GradedNothing(result)
    return result.metrics
