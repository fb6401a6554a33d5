"""The tool-call env on the bundled suite, one per test module (a module may define its own `env`)."""
import pytest

from envs.toolcall.env import ToolCallEnv, ToolCallEnvConfig
from tests.envs.toolcall.helpers import SUITE


@pytest.fixture(scope="module")
def config(env_config) -> ToolCallEnvConfig:
    return env_config("toolcall")


@pytest.fixture(scope="module")
def env(config, sandbox_config, request):
    e = ToolCallEnv(config, sandbox_config, tasks=SUITE, run_id=f"pytest-{request.module.__name__.rsplit('.', 1)[-1]}")
    yield e
    e.close()
