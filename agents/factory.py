"""Build agents from config: scripted baselines, or the model behind its serving endpoint."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from agents.base import Agent
from agents.model_cache import cached_path, ensure_cached
from agents.serving.backend import BackendConfig, serve_endpoints
from agents.serving.http_policy import HTTPPolicy
from agents.serving.transformers_policy import SamplingConfig
from nextstate.config import ModelConfig


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
    """Start (or attach to) the endpoints for `model` (one, or `backend.replicas` / `backend.servers`)
    and yield an HTTPPolicy balanced over them; stop what was started after."""
    from transformers import AutoTokenizer

    path = path or model_path(model, cache_dir)
    tokenizer = AutoTokenizer.from_pretrained(path)
    with serve_endpoints(backend, path, model_name=model.name, dtype=model.dtype, log_path=log_path) as served:
        yield HTTPPolicy(served.urls, tokenizer, sampling_of(model), model_name=model.name, model_path=str(path),
                         api_key=served.api_key)


def agent_factory(spec: dict, policy: HTTPPolicy | None = None):
    """`f(episode_index) -> Agent`, one agent per episode (scripted agents keep per-episode state), from
    an agent config (conf/agent/): its `_target_` class made with the config's other keys; a `served`
    agent also gets the policy on the run's serving endpoint."""
    from hydra.utils import instantiate

    if "_target_" not in spec:
        raise ValueError(f"agent={spec.get('name')} names no `_target_` class (see conf/agent/)")
    kwargs = {k: v for k, v in spec.items() if k not in ("name", "served")}
    if spec.get("served"):
        if policy is None:
            raise ValueError(f"agent={spec.get('name')} acts through a serving endpoint: none was started")
        return lambda i: instantiate(kwargs, policy=policy)
    return lambda i: instantiate(kwargs)


__all__ = ["Agent", "agent_factory", "cached_model_path", "model_path", "sampling_of", "serve_policy"]
