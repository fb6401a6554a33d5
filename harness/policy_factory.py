"""Build agents from config: scripted baselines, or the model through its backend."""
from __future__ import annotations

from pathlib import Path

from agents.base import Agent, ModelAgent, NoopAgent, OracleAgent
from agents.model_cache import ensure_cached
from agents.transformers_policy import SamplingConfig, TransformersPolicy

from .config import ModelConfig

SCRIPTED = {"oracle": OracleAgent, "noop": NoopAgent}


def load_policy(model: ModelConfig, cache_dir: str, seed: int) -> TransformersPolicy:
    path = ensure_cached(model.source, Path(cache_dir) / "models", package=model.package,
                         gguf_file=model.gguf_file)
    sampling = SamplingConfig(model.max_new_tokens, model.temperature, model.top_p, model.max_prompt_tokens)
    return TransformersPolicy.load(path, sampling, model_name=model.name, seed=seed, dtype=model.dtype,
                                   threads=model.threads)


def make_agent(name: str, model: ModelConfig, cache_dir: str, seed: int) -> tuple[Agent, str]:
    """The agent and the model name that goes into the leaderboard ('-' for scripted agents)."""
    if name in SCRIPTED:
        return SCRIPTED[name](), "-"
    if name == "model":
        return ModelAgent(load_policy(model, cache_dir, seed)), model.name
    raise ValueError(f"unknown agent {name!r}; choose one of {sorted([*SCRIPTED, 'model'])}")
