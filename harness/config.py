"""Typed views of the Hydra config. Values live in conf/ only; these dataclasses give them types,
and `typed(node, Cls)` validates a config node into one (a wrong key or type fails loudly)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from omegaconf import DictConfig, OmegaConf

REPO_ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = REPO_ROOT / "conf"
T = TypeVar("T")


@dataclass
class EnvConfig:
    """What every env's config has; each env extends it with its own fields (envs/<env>.py)."""

    name: str
    env_id: str
    max_steps: int
    max_seconds: float
    system_prompt: str


@dataclass
class ModelConfig:
    name: str
    source: str  # a cache name (with package + gguf_file) or a local model directory
    package: str | None
    gguf_file: str | None
    dtype: str
    max_new_tokens: int
    temperature: float
    top_p: float
    max_prompt_tokens: int
    threads: int | None = None
    init_from: str | None = None


@dataclass
class PathsConfig:
    results_dir: str
    cache_dir: str


@dataclass
class RunConfig:
    """The top-level public CLI keys."""

    mode: str
    split: str
    limit: int | None
    seed: int
    agent: str
    progress: bool
    extra: dict[str, Any] = field(default_factory=dict)


def env_config(node: DictConfig) -> EnvConfig:
    """The typed config of the env named in `node.name` (its class is listed in envs.ENVS)."""
    from envs import ENVS

    if node.name not in ENVS:
        raise ValueError(f"unknown env {node.name!r}; choose one of {sorted(ENVS)}")
    return typed(node, ENVS[node.name].config_class())


def typed(node: DictConfig | dict, cls: type[T]) -> T:
    schema = OmegaConf.structured(cls)
    merged = OmegaConf.merge(schema, node)
    return OmegaConf.to_object(merged)  # type: ignore[return-value]


def compose(overrides: list[str] | None = None) -> DictConfig:
    """The composed config outside a Hydra app (tests, library use, gym.make defaults)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    if GlobalHydra.instance().is_initialized():
        return hydra_compose(config_name="config", overrides=overrides or [])
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        return hydra_compose(config_name="config", overrides=overrides or [])
