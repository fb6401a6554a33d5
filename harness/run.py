"""`python -m harness.run`: the Hydra entry point. Public keys: env=, agent=, split=, limit=, seed=,
mode=, resume=<run_dir>."""
from __future__ import annotations

import signal
import sys
from pathlib import Path

import gymnasium as gym
import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

import envs  # noqa: F401  (registers the environments)
from envs.limits import EpisodeLimits
from envs.sandbox import SandboxConfig, docker_client, reap_orphans, wait_for_background_removals

from .atomic import write_text_atomic
from .config import REPO_ROOT, ModelConfig, env_config, typed
from .evaluate import evaluate
from .policy_factory import make_agent
from .report import print_summary

def _terminate_cleanly(signum, frame):  # SIGTERM -> the same cleanup path as Ctrl-C
    raise KeyboardInterrupt(f"signal {signum}")


def build_env(cfg: DictConfig, run_id: str):
    env_cfg = env_config(cfg.env)
    split = None if cfg.split == "all" else cfg.split
    env = gym.make(env_cfg.env_id, config=env_cfg, sandbox=typed(cfg.sandbox, SandboxConfig),
                   split=split, run_id=run_id, disable_env_checker=True)
    return EpisodeLimits(env, env_cfg.max_steps, env_cfg.max_seconds), env_cfg


def main(cfg: DictConfig) -> dict:
    signal.signal(signal.SIGTERM, _terminate_cleanly)
    run_dir = Path(cfg.get("resume") or HydraConfig.get().runtime.output_dir)
    if cfg.mode.name != "eval":
        raise SystemExit(f"mode={cfg.mode.name} is not available yet (only mode=eval)")
    removed = reap_orphans(docker_client())
    if removed:
        print(f"[nextstate] removed {len(removed)} container(s) left by dead runs: {sorted(set(removed))}")
    write_text_atomic(run_dir / "config.yaml", OmegaConf.to_yaml(cfg, resolve=True))
    env, env_cfg = build_env(cfg, run_id=run_dir.name)
    tasks = env.unwrapped.tasks[: cfg.limit] if cfg.limit else env.unwrapped.tasks
    model_cfg = typed(cfg.model, ModelConfig)
    agent, model_name = make_agent(cfg.agent.name, model_cfg, cfg.paths.cache_dir, cfg.seed)
    try:
        result = evaluate(
            env, agent, tasks, run_dir=run_dir, system_prompt=env_cfg.system_prompt, seed=cfg.seed,
            leaderboard=Path(cfg.paths.results_dir) / "leaderboard.csv", progress=cfg.progress,
            row_fields={"env": env_cfg.name, "suite": getattr(env_cfg, "suite", "-"), "split": cfg.split,
                        "agent": cfg.agent.name, "model": model_name, "signal": "none"},
        )
    finally:
        env.close()
        wait_for_background_removals()
    print_summary(result)
    return result.metrics


@hydra.main(config_path=str(REPO_ROOT / "conf"), config_name="config", version_base=None)
def cli(cfg: DictConfig) -> None:
    try:
        main(cfg)
    except KeyboardInterrupt:
        print("\n[nextstate] interrupted: containers removed; resume with "
              f"resume={HydraConfig.get().runtime.output_dir}", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    cli()
