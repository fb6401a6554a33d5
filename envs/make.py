"""From a composed config to envs: the typed config of the named env kind, and a factory of wrapped
envs (one per worker) that the harness and every training loop share."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import gymnasium as gym
from omegaconf import DictConfig

from envs import ENVS
from envs.limits import EpisodeLimits
from envs.sandbox import SandboxConfig
from nextstate.config import EnvConfig, check_ranges, typed


def env_config(node: DictConfig) -> EnvConfig:
    """The typed config of the env named in `node.name` (its class is listed in envs.ENVS)."""
    if node.name not in ENVS:
        raise ValueError(f"unknown env {node.name!r}; choose one of {sorted(ENVS)}")
    config = typed(node, ENVS[node.name].config_class())
    check_ranges("env", config, at_least={"max_steps": 1}, above={"max_seconds": 0})  # else: rows of zeros
    if hasattr(config, "obs_max_chars"):
        check_ranges("env", config, at_least={"obs_max_chars": 1})
    return config


def env_maker(cfg: DictConfig, run_dir: Path, split: str | None):
    """A factory of wrapped envs (one per worker) and the typed env config. Envs that write files of
    their own (the GUI's screenshots) write them into the run dir unless their config names a place."""
    env_cfg = env_config(cfg.env)
    sandbox = typed(cfg.sandbox, SandboxConfig)
    run_id = run_dir.name
    if getattr(env_cfg, "output_dir", False) is None:
        env_cfg = dataclasses.replace(env_cfg, output_dir=str(run_dir))

    def make(split=split, max_steps=env_cfg.max_steps):
        env = gym.make(env_cfg.env_id, config=env_cfg, sandbox=sandbox, split=split, run_id=run_id,
                       disable_env_checker=True)
        return EpisodeLimits(env, max_steps, env_cfg.max_seconds)

    return make, env_cfg
