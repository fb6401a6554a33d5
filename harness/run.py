"""`python -m harness.run`: the Hydra entry point. Public keys: env=, agent=, split=, limit=, seed=,
mode=eval|train|async|proxy|sft, resume=<run_dir>, parallel=N."""
from __future__ import annotations

import json
import signal
import sys
from contextlib import ExitStack
from pathlib import Path

import gymnasium as gym
import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

import envs  # noqa: F401  (registers the environments)
from agents.serving import BackendConfig
from envs.limits import EpisodeLimits
from envs.sandbox import SandboxConfig, docker_client, reap_orphans, wait_for_background_removals

from .atomic import write_text_atomic
from .config import REPO_ROOT, env_config, model_config, run_config, typed
from .curriculum import without_tags
from .evaluate import EnvPool, evaluate
from .policy_factory import SCRIPTED, agent_factory, serve_policy
from .report import print_summary


def _terminate_cleanly(signum, frame):  # SIGTERM -> the same cleanup path as Ctrl-C
    raise KeyboardInterrupt(f"signal {signum}")


def env_maker(cfg: DictConfig, run_id: str, split: str | None):
    """A factory of wrapped envs (one per worker) and the typed env config."""
    env_cfg = env_config(cfg.env)
    sandbox = typed(cfg.sandbox, SandboxConfig)

    def make(split=split, max_steps=env_cfg.max_steps):
        env = gym.make(env_cfg.env_id, config=env_cfg, sandbox=sandbox, split=split, run_id=run_id,
                       disable_env_checker=True)
        return EpisodeLimits(env, max_steps, env_cfg.max_seconds)

    return make, env_cfg


def select_tasks(env, limit: int | None, exclude_tags=None):
    """The env's tasks (already narrowed to the split it was made with), less excluded tags, first `limit`."""
    tasks = without_tags(env.unwrapped.tasks, exclude_tags)
    return tasks[:limit] if limit else tasks


def already_finished(cfg: DictConfig, run_dir: Path) -> dict | None:
    """The metrics of this same run, finished earlier in `run_dir` (so a sweep run again skips its
    finished jobs), or None. A resumed run may ask for more iterations, and then goes on. A finished
    run there with another config is an error: its results would be filed under the wrong config."""
    try:
        done = json.loads((run_dir / "metrics.json").read_text())
        recorded = OmegaConf.to_container(OmegaConf.load(run_dir / "config.yaml"), resolve=True)
    except (OSError, json.JSONDecodeError):
        return None
    if done.get("iterations", 0) < cfg.mode.iterations:
        return None
    now = OmegaConf.to_container(cfg, resolve=True)
    changed = sorted(k for k in {*recorded, *now} - {"resume"} if recorded.get(k) != now.get(k))
    if changed:
        raise SystemExit(f"{run_dir} holds a finished run with another config (differs in: {', '.join(changed)}); "
                         "choose another run dir (hydra.run.dir / hydra.sweep.dir) or delete that one")
    return done


def recorded_config(cfg: DictConfig) -> dict:
    """The resolved config as the run dir records it, with secrets (the proxy's API key) masked."""
    out = OmegaConf.to_container(cfg, resolve=True)
    if out["mode"].get("api_key"):
        out["mode"]["api_key"] = "<set>"
    return out


def main(cfg: DictConfig) -> dict:
    signal.signal(signal.SIGTERM, _terminate_cleanly)
    run_config(cfg)
    run_dir = Path(cfg.get("resume") or HydraConfig.get().runtime.output_dir)
    if cfg.agent.name not in SCRIPTED and cfg.agent.name != "model":
        raise SystemExit(f"unknown agent {cfg.agent.name!r}; choose one of {sorted([*SCRIPTED, 'model'])}")
    try:
        removed = reap_orphans(docker_client())
    except Exception as e:  # Docker-free envs can run without a daemon
        removed = []
        print(f"[nextstate] Docker not reachable ({e}); containers cannot be reaped", file=sys.stderr)
    if removed:
        print(f"[nextstate] removed {len(removed)} container(s) left by dead runs: {sorted(set(removed))}")
    done = already_finished(cfg, run_dir) if cfg.mode.name in ("train", "async") else None
    if done is not None:
        print(f"[train] {run_dir} already finished (delete its metrics.json to run it again)")
        return done
    write_text_atomic(run_dir / "config.yaml", OmegaConf.to_yaml(recorded_config(cfg)))
    if cfg.mode.name == "train":
        from .train import train_main

        return train_main(cfg, run_dir)
    if cfg.mode.name == "async":
        from .async_train import async_main

        return async_main(cfg, run_dir)
    if cfg.mode.name == "proxy":
        from .proxy import proxy_main

        return proxy_main(cfg, run_dir)
    if cfg.mode.name == "sft":
        from .sft_run import sft_main

        return sft_main(cfg, run_dir)
    if cfg.mode.name != "eval":
        raise SystemExit(f"mode={cfg.mode.name} is not available (eval | train | async | proxy | sft)")
    split = None if cfg.split == "all" else cfg.split
    make_env, env_cfg = env_maker(cfg, run_dir.name, split)
    pool = EnvPool(make_env)
    model_cfg = model_config(cfg.model)
    with ExitStack() as stack:
        stack.callback(wait_for_background_removals)
        stack.callback(pool.close)
        policy = None
        if cfg.agent.name == "model":
            policy = stack.enter_context(serve_policy(model_cfg, typed(cfg.backend, BackendConfig),
                                                      cfg.paths.cache_dir, log_path=run_dir / "server.log"))
        tasks = select_tasks(pool.get(), cfg.limit, cfg.get("exclude_tags"))
        result = evaluate(
            pool, agent_factory(cfg.agent.name, policy), tasks, run_dir=run_dir,
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
        print("\n[nextstate] interrupted: containers removed; resume with "
              f"resume={HydraConfig.get().runtime.output_dir}", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    cli()
