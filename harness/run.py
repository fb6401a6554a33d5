"""`python -m harness.run`: the Hydra entry point. Public keys: env=, agent=, split=, limit=, seed=,
mode=eval|train|async|proxy|sft, resume=<run_dir>, parallel=N."""
from __future__ import annotations

import signal
import sys
from contextlib import ExitStack
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

import envs  # noqa: F401  (registers the environments)
from agents.factory import agent_factory, serve_policy
from agents.pool import EnvPool
from agents.serving.backend import BackendConfig
from envs.make import env_maker
from envs.sandbox import docker_client, reap_orphans, wait_for_background_removals
from harness.evaluate import evaluate
from harness.reports.console import print_summary
from harness.reports.plots import write_sweep_plot
from harness.resume import already_finished, check_resumable, recorded_config, resume_command
from nextstate.atomic import write_text_atomic
from nextstate.config import REPO_ROOT, model_config, run_config, typed
from nextstate.leaderboard import file_pending_row
from trainers.curriculum import without_tags


def _terminate_cleanly(signum, frame):  # SIGTERM -> the same cleanup path as Ctrl-C
    raise KeyboardInterrupt(f"signal {signum}")


def select_tasks(env, limit: int | None, exclude_tags=None):
    """The env's tasks (already narrowed to the split it was made with), less excluded tags, first `limit`."""
    tasks = without_tags(env.unwrapped.tasks, exclude_tags)
    return tasks[:limit] if limit else tasks


def run_dir_of(cfg: DictConfig) -> Path:
    """The run's dir: the one being resumed, or Hydra's new one."""
    return Path(cfg.get("resume") or HydraConfig.get().runtime.output_dir)


def _plotting_sweep(metrics: dict) -> dict:
    """In a Hydra multirun, redraw the sweep's success-vs-samples plot from every finished job."""
    try:
        hc = HydraConfig.get()
    except ValueError:
        return metrics
    if hc.mode is not None and hc.mode.name == "MULTIRUN":
        path = write_sweep_plot(Path(hc.sweep.dir))
        print(f"[nextstate] sweep plot: {path}")
    return metrics


def main(cfg: DictConfig) -> dict:
    signal.signal(signal.SIGTERM, _terminate_cleanly)
    run_config(cfg)
    if cfg.limit is not None and cfg.mode.name != "eval":  # training reads its own eval_limit
        raise SystemExit(f"limit={cfg.limit} selects the tasks of mode=eval; use mode.eval_limit={cfg.limit}")
    run_dir = run_dir_of(cfg)
    check_resumable(cfg, run_dir)
    if "_target_" not in cfg.agent:
        raise SystemExit(f"agent={cfg.agent.name} names no `_target_` class (conf/agent/ has one per agent)")
    try:
        removed = reap_orphans(docker_client())
    except Exception as e:  # Docker-free envs can run without a daemon
        removed = []
        print(f"[nextstate] Docker not reachable ({e}); containers cannot be reaped", file=sys.stderr)
    if removed:
        print(f"[nextstate] removed {len(removed)} container(s) left by dead runs: {sorted(set(removed))}")
    if file_pending_row(run_dir):  # a run killed between its metrics.json and its leaderboard row
        print(f"[nextstate] {run_dir}: filed the leaderboard row the earlier run left pending")
    done = already_finished(cfg, run_dir) if cfg.mode.name in ("eval", "train", "async") else None
    if done is not None:
        print(f"[nextstate] {run_dir} already finished (delete its metrics.json to run it again)")
        return done
    write_text_atomic(run_dir / "config.yaml", OmegaConf.to_yaml(recorded_config(cfg)))
    if cfg.mode.name == "train":
        from trainers.sync import train_main

        return _plotting_sweep(train_main(cfg, run_dir))
    if cfg.mode.name == "async":
        from trainers.async_train import async_main

        return _plotting_sweep(async_main(cfg, run_dir))
    if cfg.mode.name == "proxy":
        from trainers.proxy.server import proxy_main

        return proxy_main(cfg, run_dir)
    if cfg.mode.name == "sft":
        from trainers.sft_run import sft_main

        return sft_main(cfg, run_dir)
    if cfg.mode.name != "eval":
        raise SystemExit(f"mode={cfg.mode.name} is not available (eval | train | async | proxy | sft)")
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
            row_fields={"env": env_cfg.name, "suite": getattr(env_cfg, "suite", "-"), "split": cfg.split,
                        "agent": cfg.agent.name, "model": model_cfg.name if policy else "-",
                        "signal": "none"},
        )
    print_summary(result)
    return result.metrics


@hydra.main(config_path=str(REPO_ROOT / "conf"), config_name="config", version_base=None)
def cli(cfg: DictConfig) -> None:
    try:
        main(cfg)
    except KeyboardInterrupt:
        command = resume_command(HydraConfig.get().overrides.task, run_dir_of(cfg))
        print(f"\n[nextstate] interrupted: containers removed; resume with: {command}", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    cli()
