"""The composed Hydra config -> the typed `Job` a mode runs on (trainers/job.py): every section
validated into its class (a wrong key or type fails here, naming it) and its numbers checked, before
the mode starts anything. The only place config nodes are read on a run's path."""
from __future__ import annotations

import dataclasses

from omegaconf import DictConfig, OmegaConf

from agents.serving.backend import BackendConfig
from envs import ENVS
from envs.sandbox import SandboxConfig
from nextstate.config import ConfigError, EnvConfig, PathsConfig, check_ranges, model_config, run_config, typed
from trainers.job import Job


def env_config(node: DictConfig) -> EnvConfig:
    """The typed config of the env named in `node.name` (its class is listed in envs.ENVS)."""
    if node.name not in ENVS:
        raise ValueError(f"unknown env {node.name!r}; choose one of {sorted(ENVS)}")
    config = typed(node, ENVS[node.name].config_class())
    check_ranges("env", config, at_least={"max_steps": 1}, above={"max_seconds": 0})  # else: rows of zeros
    if hasattr(config, "obs_max_chars"):
        check_ranges("env", config, at_least={"obs_max_chars": 1})
    return config


def feedback_config(node: DictConfig, table: dict, group: str):
    """The judge or hint kind's own config class (trainers.feedback.registry): `judge=oracle` has no
    prompt or sampling fields, so setting one is refused, naming the kind's fields."""
    from trainers.feedback.registry import choose

    cls = choose(table, group, node.name).config
    known = [f.name for f in dataclasses.fields(cls)]
    extra = sorted(set(node) - set(known))
    if extra:
        raise ConfigError(f"{group}.{extra[0]}: {group}={node.name} has no such field (its fields: "
                          f"{', '.join(known)})")
    return typed(node, cls)


def job_of(cfg: DictConfig, mode_config: type, *, trains: bool) -> Job:
    """The run's `Job`; the training sections (signal, judge, hints, ray) only where the mode `trains`."""
    run = run_config(cfg)
    training = {}
    if trains:
        from trainers.feedback.registry import HINTERS, JUDGES
        from trainers.ray_runtime import RayConfig
        from trainers.signals import SignalConfig

        training = {"signal": typed(cfg.signal, SignalConfig), "judge": feedback_config(cfg.judge, JUDGES, "judge"),
                    "hints": feedback_config(cfg.hints, HINTERS, "hints"), "ray": typed(cfg.ray, RayConfig)}
    tags = cfg.get("exclude_tags")
    return Job(seed=run.seed, parallel=run.parallel, progress=run.progress, split=run.split, limit=run.limit,
               exclude_tags=list(tags) if tags else None, paths=typed(cfg.paths, PathsConfig),
               env=env_config(cfg.env), sandbox=typed(cfg.sandbox, SandboxConfig),
               agent=OmegaConf.to_container(cfg.agent, resolve=True), model=model_config(cfg.model),
               backend=typed(cfg.backend, BackendConfig), mode=typed(cfg.mode, mode_config), **training)


def compose_job(overrides: list[str]) -> Job:
    """The `Job` a run with these overrides would get, outside the app (benchmarks, notebooks)."""
    from harness.modes import MODES
    from nextstate.config import compose

    cfg = compose(overrides)
    mode = MODES[cfg.mode.name]
    return job_of(cfg, mode.load()[1], trains=mode.trains)
