"""The bundled suite's `run_python` tool with real Docker: the oracle solves the python tasks; code
has no network, runs unprivileged, is cut at its timeout; leftovers are cleared between episodes; a
dead sandbox is an infra failure, never a zero."""
import json

import pytest

from agents.base import OracleAgent
from agents.rollout import run_episode
from envs.toolcall.env import ToolCallEnv
from tests.envs.toolcall.helpers import SUITE
from tests.envs.toolcall.helpers import run_python as run

pytestmark = pytest.mark.docker
PYTHON_TASKS = [t for t in SUITE if "python" in t.data["toolsets"]]
TASK = "py-fibonacci"


@pytest.fixture(scope="module")
def env(env_config, sandbox_config, terminal_image):
    config = env_config("toolcall", "env.python_timeout_s=2")
    e = ToolCallEnv(config, sandbox_config, tasks=SUITE, run_id="pytest-toolcall-python")
    yield e
    e.close()


@pytest.mark.parametrize("task", PYTHON_TASKS, ids=lambda t: t.task_id)
def test_oracle_solves_python_tasks(env, task):
    traj = run_episode(env, OracleAgent(), task, "system")
    assert traj.success, traj.info.get("test_output")
    assert all(s.info["step_label"]["executed_ok"] for s in traj.steps[:-1])


def test_no_network_unprivileged(env):
    env.reset(options={"task_id": TASK})
    out = run(env, "import os, socket\nprint('uid', os.getuid())\n"
                   "try:\n    socket.create_connection(('1.1.1.1', 53), timeout=3)\n    print('CONNECTED')\n"
                   "except OSError as e:\n    print('no network:', e)\n"
                   "try:\n    socket.getaddrinfo('pypi.org', 443)\n    print('RESOLVED')\n"
                   "except OSError as e:\n    print('no dns:', e)")
    assert out["exit_code"] == 0 and "uid 1000" in out["output"]
    assert "no network" in out["output"] and "no dns" in out["output"]
    assert "CONNECTED" not in out["output"] and "RESOLVED" not in out["output"]


def test_timeout_is_enforced_and_the_tool_survives(env):
    import time
    env.reset(options={"task_id": TASK})
    t0 = time.monotonic()
    out = run(env, "import time\nprint('start', flush=True)\nwhile True:\n    time.sleep(0.01)")
    assert time.monotonic() - t0 < 10
    assert "timed out after 2 s" in out["error"] and "start" in out["output"]
    assert run(env, "print(6 * 7)") == {"output": "42\n", "exit_code": 0}
    err = run(env, "raise SystemExit(3)")
    assert err["exit_code"] == 3 and "error" not in err


def test_leftovers_are_cleared_between_episodes(env):
    env.reset(options={"task_id": TASK})
    run(env, "import subprocess\nopen('mark', 'w').write('x')\n"
             "subprocess.Popen(['sleep', '300'], start_new_session=True)")
    env.reset(options={"task_id": TASK})
    out = run(env, "import os, subprocess\nprint(os.path.exists('mark'))\n"
                   "print(subprocess.run(['pgrep', '-u', 'agent', '-x', 'sleep'], capture_output=True).returncode)")
    assert out["output"].split() == ["False", "1"]  # no file, no process


def test_dead_sandbox_is_an_infra_failure(env, docker):
    env.reset(options={"task_id": TASK})
    run(env, "print(1)")
    docker.containers.get(env._python._sandbox.container_id).kill()
    call = json.dumps({"name": "run_python", "arguments": {"code": "print(2)"}})
    obs, reward, terminated, truncated, info = env.step(f"<tool_call>{call}</tool_call>")
    assert info["infra_failure"] and terminated and "infrastructure failure" in obs
    assert "outcome" not in info  # never scored
    env.reset(options={"task_id": TASK})  # the next episode gets a new sandbox
    assert run(env, "print(3)")["output"] == "3\n"
