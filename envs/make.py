"""A factory of wrapped envs (one per worker) that the harness and every training loop share."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import gymnasium as gym

from envs.limits import EpisodeLimits
from envs.sandbox import SandboxConfig
from nextstate.config import EnvConfig


def env_maker(env_cfg: EnvConfig, sandbox: SandboxConfig, run_dir: Path, split: str | None):
    """A factory of wrapped envs (one per worker) and the env config they use. Envs that write files of
    their own (the GUI's screenshots) write them into the run dir unless their config names a place."""
    run_id = run_dir.name
    if getattr(env_cfg, "output_dir", False) is None:
        env_cfg = dataclasses.replace(env_cfg, output_dir=str(run_dir))

    def make(split=split, max_steps=env_cfg.max_steps):
        env = gym.make(env_cfg.env_id, config=env_cfg, sandbox=sandbox, split=split, run_id=run_id,
                       disable_env_checker=True)
        return EpisodeLimits(env, max_steps, env_cfg.max_seconds)

    return make, env_cfg
