"""Shared fixtures, and the parts some tests need. Tests marked `docker` use the real engine (`make
test` starts it), `model` the real SmolLM2-135M-Instruct from the local cache (`make test` prepares
it), `chromium` the real Chromium, `cluster` a simulated Ray cluster on this machine (several
nodes of `ray.cluster_utils.Cluster`). Where a part is absent its tests are skipped with the reason;
under CI (CI=true) they fail instead, so that a CI machine missing a part cannot pass by skipping
half the suite."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from nextstate.config import ModelConfig, compose, typed
from tests.paths import ROOT


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
    try:
        import ray.cluster_utils  # noqa: F401
    except ImportError as e:
        return f"Ray is not installed ({e}); `make setup` installs it"
    return None


PARTS = {"docker": _docker_absent, "model": _model_absent, "chromium": _chromium_absent,
         "cluster": _cluster_absent}
OPT_IN: set[str] = set()  # parts skipped where absent, even under CI


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
def env_config():
    """`env_config("toolcall", "env.suite=bfcl_all")`: the typed config of that env, composed as the
    app composes it (`env=<name>` plus the overrides), checked as a run checks it."""
    from harness.job import env_config as typed_env_config

    def make(name: str, *overrides: str):
        return typed_env_config(compose([f"env={name}", *overrides]).env)

    return make


@pytest.fixture(scope="session")
def terminal_config(env_config):
    return env_config("terminal")


@pytest.fixture(scope="session")
def run_cli():
    """`run_cli("harness.run", "env=chat", env={"NEXTSTATE_RESULTS": tmp_path})`: runs
    `python -m <module> <args>` from the repository root as a user does, with the environment's
    variables plus `env`, output captured as text; returns the CompletedProcess (a nonzero exit is
    for the test to judge). Other keywords go to subprocess.run (`input=`, `check=`)."""

    def run(module: str, *args, env: dict | None = None, timeout: float = 600, cwd: Path = ROOT,
            **kw) -> subprocess.CompletedProcess:
        environ = dict(os.environ, **{k: str(v) for k, v in (env or {}).items()})
        return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=cwd, env=environ,
                              capture_output=True, text=True, timeout=timeout, **kw)

    return run


@pytest.fixture(scope="session")
def harness_run(run_cli):
    """`harness_run(results, "env=toolcall", "agent=oracle")`: `python -m harness.run progress=false
    ...` with its results (leaderboard, run dirs) under `results` (NEXTSTATE_RESULTS)."""

    def run(results: Path, *overrides, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
        env = {"NEXTSTATE_RESULTS": results, **kw.pop("env", {})}
        return run_cli("harness.run", "progress=false", *overrides, env=env, timeout=timeout, **kw)

    return run


@pytest.fixture(scope="session")
def model_server(cfg, tmp_path_factory):
    """One embedded server of the default model for the whole session (a start loads the model, ~15 s):
    (the running servers, the model's path, its tokenizer). Tests talk to it through `served`. A test
    that swaps its weights puts the initial ones back."""
    from transformers import AutoTokenizer

    from agents.factory import model_path
    from agents.serving.backend import BackendConfig, serve_endpoints
    from nextstate.config import model_config

    model = model_config(cfg.model)
    path = model_path(model, cfg.paths.cache_dir)
    log = tmp_path_factory.mktemp("model_server") / "server.log"
    with serve_endpoints(typed(cfg.backend, BackendConfig), path, model_name=model.name, dtype=model.dtype,
                         log_path=log) as servers:
        yield servers, path, AutoTokenizer.from_pretrained(path)


@pytest.fixture
def served(cfg, model_server):
    """A client of the session's model server with the default sampling settings, one per test: a test
    that changes `served.sampling` changes nothing for the next."""
    from agents.factory import sampling_of
    from agents.serving.http_policy import HTTPPolicy
    from nextstate.config import model_config

    servers, path, tokenizer = model_server
    model = model_config(cfg.model)
    return HTTPPolicy(servers.urls, tokenizer, sampling_of(model), model_name=model.name, model_path=str(path),
                      api_key=servers.api_key)


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
def _no_leftover_containers(request):
    """Every test session leaves no NextState container behind: its background removals are waited for,
    and a container this process still owns is removed and named on stderr (a leak to find: its
    `nextstate.run` label says which test made it)."""
    yield
    from envs.sandbox import docker_client, wait_for_background_removals
    from envs.sandbox.labels import PID_LABEL, RUN_LABEL

    wait_for_background_removals()
    try:
        client = docker_client()
        left = client.containers.list(all=True, filters={"label": f"{PID_LABEL}={os.getpid()}"})
        for c in left:
            c.remove(force=True)
    except Exception:  # no daemon here (nothing to leave), or it went away with the session
        return
    if left:
        runs = sorted({c.labels.get(RUN_LABEL, "?") for c in left})
        plugins = request.config.pluginmanager
        with plugins.get_plugin("capturemanager").global_and_fixture_disabled():
            plugins.get_plugin("terminalreporter").write_line(
                f"[tests] {len(left)} container(s) left behind by this session, removed: {runs}", yellow=True)
