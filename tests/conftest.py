"""Shared fixtures, and the parts some tests need. Tests marked `docker` use the real engine (`make
test` starts it), `model` the real SmolLM2-135M-Instruct from the local cache (`make test` prepares
it), `chromium` the real Chromium, `cluster` a Ray cluster. Where a part is absent its tests are
skipped with the reason; under CI (CI=true) they fail instead, so that a CI machine missing a part
cannot pass by skipping half the suite (a cluster is opt-in everywhere: no CI has one)."""
from __future__ import annotations

import os
import shutil
from functools import cache

import pytest

from nextstate.config import ModelConfig, compose, typed


def _docker_absent() -> str | None:
    import docker

    try:
        client = docker.from_env(timeout=10)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as e:  # no socket, no daemon, no permission: all the same to a test
        return f"the Docker daemon does not answer ({e}); scripts/ensure_docker.sh starts it (make test does)"
    return None


def _model_absent() -> str | None:
    from agents.factory import cached_model_path

    cfg = compose()
    model = typed(cfg.model, ModelConfig)
    if cached_model_path(model, cfg.paths.cache_dir) is None:
        return (f"the default model ({model.name}) is not in the model cache under {cfg.paths.cache_dir} "
                "(NEXTSTATE_CACHE); `make model` puts it there")
    return None


def _chromium_absent() -> str | None:
    path = compose(["env=gui"]).env.chromium
    if shutil.which(path) is None:
        return f"no Chromium at {path} (env.chromium); `make setup` installs Debian's chromium"
    return None


def _cluster_absent() -> str | None:
    if not os.environ.get("RAY_ADDRESS"):
        return "no Ray cluster named; set RAY_ADDRESS to run the cluster tests"
    return None


PARTS = {"docker": _docker_absent, "model": _model_absent, "chromium": _chromium_absent,
         "cluster": _cluster_absent}
OPT_IN = {"cluster"}  # skipped where absent, even under CI


@cache
def part_absent(part: str) -> str | None:
    """Why `part` is not available here (None: it is). Checked once, when a test first needs it."""
    return PARTS[part]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    for part in PARTS:
        if item.get_closest_marker(part) is None or (reason := part_absent(part)) is None:
            continue
        if os.environ.get("CI", "").lower() in ("true", "1") and part not in OPT_IN:
            pytest.fail(f"CI=true, and this `{part}` test cannot run: {reason}", pytrace=False)
        pytest.skip(f"needs {part}: {reason}")


@pytest.fixture(scope="session")
def cfg():
    return compose()


@pytest.fixture(scope="session")
def terminal_config():
    from envs.terminal.env import TerminalEnvConfig

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
