"""Shared fixtures. Docker tests use the real engine (`make test` starts it); the model tests load
the real SmolLM2-135M-Instruct from the local cache (`make test` prepares it)."""
from __future__ import annotations

import pytest

from harness.config import compose, typed


@pytest.fixture(scope="session")
def cfg():
    return compose()


@pytest.fixture(scope="session")
def terminal_config():
    from envs.terminal import TerminalEnvConfig

    return typed(compose(["env=terminal"]).env, TerminalEnvConfig)


@pytest.fixture(scope="session")
def sandbox_config(cfg):
    from envs.sandbox import SandboxConfig

    return typed(cfg.sandbox, SandboxConfig)


@pytest.fixture(scope="session")
def docker(request):
    from envs.sandbox import docker_client

    return docker_client()  # raises SandboxError with the fix when no daemon answers


@pytest.fixture(scope="session")
def terminal_image(docker, terminal_config) -> str:
    from envs.sandbox.images import ensure_shared_image

    return ensure_shared_image(docker, terminal_config.shared_image, terminal_config.base_image)


@pytest.fixture(scope="session", autouse=True)
def _no_leftover_containers():
    """Every test session must leave no NextState container behind."""
    yield
    from envs.sandbox import wait_for_background_removals

    wait_for_background_removals()
