"""The terminal env end to end, with real Docker: the suite's validity check (oracle solves every
task, noop none), the Gymnasium contract, bad actions, hidden tests, infra failures, limits."""

import pytest

import envs  # noqa: F401
from agents.base import NoopAgent, OracleAgent, ReplayAgent
from agents.rollout import run_episode
from envs.limits import EpisodeLimits
from envs.task_formats import load_suite, load_task_dir
from envs.terminal.env import TerminalEnv
from tests.paths import FIXTURES, ROOT
from tests.sampling import spread

pytestmark = pytest.mark.docker
SUITE = load_suite(ROOT / "envs" / "tasks" / "terminal")
HARBOR = load_task_dir(FIXTURES / "harbor" / "hello-harbor")


@pytest.fixture(scope="module")
def env(terminal_config, sandbox_config, terminal_image):
    e = TerminalEnv(terminal_config, sandbox_config, tasks=[*SUITE, HARBOR], run_id="pytest-terminal")
    yield e
    e.close()


@pytest.mark.parametrize("task", spread(SUITE + [HARBOR], lambda t: t.task_id))
def test_oracle_solves(env, terminal_config, task):
    traj = run_episode(env, OracleAgent(), task, terminal_config.system_prompt)
    assert not traj.infra_failure, traj.infra_reason
    assert traj.success and traj.outcome == 1.0, traj.info.get("test_output")
    assert traj.steps[-1].reward == 1.0 and traj.terminated


@pytest.mark.parametrize("task", spread(SUITE + [HARBOR], lambda t: t.task_id))
def test_noop_fails(env, terminal_config, task):
    traj = run_episode(env, NoopAgent(), task, terminal_config.system_prompt)
    assert not traj.infra_failure and not traj.success and traj.outcome == 0.0


def test_bad_actions_become_error_next_states(env):
    env.reset(options={"task_id": SUITE[0].task_id})
    for junk in ["", "\x00\x01\x02\x03", "I would probably list\nthe files now\nif I could"]:
        obs, reward, terminated, truncated, info = env.step(junk)
        assert obs.startswith("[error]") and info["next_state"].kind == "error"
        assert reward == 0.0 and not terminated and not truncated and info["step_label"] == {"parsed": False}
    obs, *_ , info = env.step("```bash\necho hi; false\n```")
    assert "[exit code 1]" in obs and "hi" in obs and info["step_label"] == {"parsed": True, "exit_ok": False}


ROOT_TASK = next(t for t in SUITE if t.data.get("run_as") == "root")


@pytest.mark.parametrize("task", [SUITE[0], ROOT_TASK], ids=["as-agent", "as-root"])
def test_tests_are_hidden_and_tamper_proof(env, terminal_config, task):
    oracle = OracleAgent()
    oracle.begin(task, env.reference_actions(task))
    replies = [
        "```bash\nls /tests; echo status=$?\n```",
        # a background job that would overwrite the tests as soon as they appear
        "```bash\n(while true; do cp /dev/null /tests/run-tests.sh 2>/dev/null; sleep 0.05; done) &\n```",
        oracle.act([]).text, "DONE",
    ]
    traj = run_episode(env, ReplayAgent(replies), task, terminal_config.system_prompt)
    assert "status=2" in traj.steps[0].next_state.text  # no such directory during the episode
    assert traj.success


def test_max_steps_truncates_and_still_grades(env, terminal_config):
    task = SUITE[0]
    limited = EpisodeLimits(env, max_steps=2)
    oracle_reply = env.reference_actions(task)[0]
    traj = run_episode(limited, ReplayAgent(["```bash\ntrue\n```", oracle_reply, "DONE"]), task,
                       terminal_config.system_prompt)
    assert traj.truncated and not traj.terminated and len(traj.steps) == 2
    assert traj.success  # the work done before the cut is graded


def test_dead_container_is_an_infra_failure_not_a_zero(env, docker):
    env.reset(options={"task_id": SUITE[0].task_id})
    docker.containers.get(env._sandbox.container_id).kill()
    obs, reward, terminated, truncated, info = env.step("```bash\nls\n```")
    assert info["infra_failure"] and terminated and "infrastructure failure" in obs
    obs, info = env.reset(options={"task_id": SUITE[0].task_id})  # and the next episode works
    assert not info.get("infra_failure")
    assert "[exit code 0]" in env.step("```bash\ntrue\n```")[0]
