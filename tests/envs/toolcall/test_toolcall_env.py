"""The tool-call env on its bundled suite, without Docker (the python tool's tests are in
test_toolcall_python.py): suite validity (oracle solves every task, noop none), the Gymnasium contract,
bad replies as error next states, step labels, limits, episode isolation."""
import pytest

import envs  # noqa: F401
from agents.base import NoopAgent, OracleAgent, ReplayAgent
from agents.rollout import run_episode
from envs.limits import EpisodeLimits
from envs.toolcall.bundled import task_tools
from envs.toolcall.env import ToolCallEnv
from envs.toolcall.tools import toolsets
from envs.toolcall.validate import check_calls
from tests.envs.toolcall.helpers import SUITE

NO_DOCKER = [t for t in SUITE if "python" not in t.data["toolsets"]]
STATE_TASK = "store-cancel-and-restore"  # graded on state only
ANSWER_TASK = "store-order-total-question"  # graded on the answer only


def test_suite_shape():
    assert len(SUITE) >= 40 and len({t.task_id for t in SUITE}) == len(SUITE)
    assert {t.split for t in SUITE} == {"train", "test"}
    used = {s for t in SUITE for s in t.data["toolsets"]}
    assert used == set(toolsets()) == {"store", "calendar", "notes", "python"}
    assert sum(len(t.data["reference"]) > 1 for t in SUITE) >= 35  # multi-step
    for t in SUITE:  # every reference call is one the task's tools accept
        specs = {name: tool.spec() for name, tool in task_tools(t).items()}
        for step in t.data["reference"]:
            assert check_calls(step, specs)[1] is None, t.task_id


def test_default_suite_is_bundled_and_composes(config):
    assert config.suite == "bundled" and config.env_id == "nextstate/ToolCall-v0"
    e = ToolCallEnv(config, split="test")
    assert e.tasks and all(t.split == "test" for t in e.tasks)


@pytest.mark.parametrize("task", NO_DOCKER, ids=lambda t: t.task_id)
def test_oracle_solves(env, config, task):
    traj = run_episode(env, OracleAgent(), task, config.system_prompt)
    assert traj.success and traj.outcome == 1.0 and traj.terminated, traj.info.get("test_output")
    call_steps = traj.steps[:-1]
    assert len(call_steps) == len(task.data["reference"])
    for s in call_steps:  # the reference path is all "correct" steps
        assert s.next_state.kind == "tool" and "tool_bugs" not in s.next_state.fields
        assert s.info["step_label"] == {"well_formed": True, "executed_ok": True, "matches_reference": True}
    assert traj.steps[-1].reward == 1.0


@pytest.mark.parametrize("task", SUITE, ids=lambda t: t.task_id)
def test_noop_fails(env, config, task):  # noop never calls python: no Docker needed
    traj = run_episode(env, NoopAgent(), task, config.system_prompt)
    assert not traj.infra_failure and not traj.success and traj.outcome == 0.0


def test_bad_replies_are_error_next_states_and_the_episode_goes_on(env, config):
    task = next(t for t in SUITE if t.task_id == STATE_TASK)
    bad = [
        "",
        "<tool_call>{'name': 'find_customers'}</tool_call>",
        '<tool_call>{"name": "find_customers", "arguments": {"query": "Chen"}',
        '<tool_call>{"name": "drop_table", "arguments": {}}</tool_call>',
        '<tool_call>{"name": "cancel_order", "arguments": {"order_id": "5"}}</tool_call>',
        '<tool_call>{"name": "cancel_order", "arguments": {}}</tool_call>',
        '<tool_call>{"name": "cancel_order", "arguments": {"order_id": 5, "force": true}}</tool_call>',
        '<tool_call>{"name": "list_orders", "arguments": {"status": "lost"}}</tool_call>',  # enum
    ]
    expect = ["empty reply", "not valid JSON", "unbalanced", "unknown tool 'drop_table'",
              "expected integer, got string", "missing required", "unknown argument(s) 'force'", "must be one of"]
    traj = run_episode(env, ReplayAgent(bad + env.reference_actions(task)), task, config.system_prompt)
    for step, reason in zip(traj.steps, expect):
        assert reason in step.next_state.text, (reason, step.next_state)
        assert step.reward == 0.0 and not step.info["step_label"]["matches_reference"]
    assert all(s.next_state.kind == "error" for s in traj.steps[:7])
    assert traj.steps[7].next_state.kind == "tool" and traj.steps[7].info["step_label"]["executed_ok"] is False
    assert traj.success  # the agent read its errors and finished the task


def test_a_tool_refusal_is_a_tool_next_state_with_a_false_label(env):
    env.reset(options={"task_id": STATE_TASK})
    obs, reward, terminated, truncated, info = env.step(
        '<tool_call>{"name": "get_order", "arguments": {"order_id": 99}}</tool_call>'
        '<tool_call>{"name": "get_order", "arguments": {"order_id": 5}}</tool_call>')
    assert info["next_state"].kind == "tool" and obs.count("<tool_response>") == 2
    assert '{"error": "no order with id 99"}' in obs and '"total": 115.5' in obs
    assert info["step_label"] == {"well_formed": True, "executed_ok": False, "matches_reference": False}
    assert not terminated and not truncated


def test_final_answer_ends_and_grades(env):
    env.reset(options={"task_id": ANSWER_TASK})
    obs, reward, terminated, truncated, info = env.step("It is 318.80 in total.")
    assert terminated and reward == 1.0 and info["success"] and info["test_output"] == "all checks passed"
    env.reset(options={"task_id": ANSWER_TASK})
    *_, info = env.step("It is 300.")
    assert info["outcome"] == 0.0 and "answer contains" in info["test_output"]


def test_max_steps_truncates_and_still_grades(env, config):
    state_task = next(t for t in SUITE if t.task_id == STATE_TASK)
    refs = env.reference_actions(state_task)
    limited = EpisodeLimits(env, max_steps=len(refs) - 1)  # every call, but no final answer
    traj = run_episode(limited, ReplayAgent(refs), state_task, config.system_prompt)
    assert traj.truncated and not traj.terminated and traj.success  # the state is what is graded
    answer_task = next(t for t in SUITE if t.task_id == ANSWER_TASK)
    refs = env.reference_actions(answer_task)
    traj = run_episode(EpisodeLimits(env, max_steps=len(refs) - 1), ReplayAgent(refs), answer_task,
                       config.system_prompt)
    assert traj.truncated and not traj.success  # no answer was given


def test_episodes_start_from_the_seed_state(env):
    env.reset(options={"task_id": STATE_TASK})
    env.step('<tool_call>{"name": "cancel_order", "arguments": {"order_id": 5}}</tool_call>')
    env.reset(options={"task_id": STATE_TASK})
    obs, *_ = env.step('<tool_call>{"name": "get_order", "arguments": {"order_id": 5}}</tool_call>')
    assert '"status": "pending"' in obs


def test_tools_are_openai_function_schemas(env):
    for task in SUITE:
        tools = env.tools_for(task)
        assert {t["function"]["name"] for t in tools} == set(task_tools(task))
        for t in tools:
            assert t["type"] == "function" and t["function"]["parameters"]["type"] == "object"
            params = t["function"]["parameters"]
            assert set(params["required"]) <= set(params["properties"])
            assert all(p["type"] in {"string", "integer", "number", "boolean", "array", "object"}
                       for p in params["properties"].values())


def test_the_seed_does_not_shape_an_episode(env):
    """The env says `seed_shapes_episodes = False`, so training caches one greedy before-eval for every
    seed of a sweep: the same task and reply give the same next states under any seed."""
    assert env.seed_shapes_episodes is False
    reply = '<tool_call>{"name": "get_order", "arguments": {"order_id": 5}}</tool_call>'
    seen = set()
    for seed in (0, 1, 12345):
        obs0, _ = env.reset(seed=seed, options={"task_id": STATE_TASK})
        obs1, *_ = env.step(reply)
        seen.add((obs0, obs1))
    assert len(seen) == 1


def test_a_reset_naming_an_unknown_task_says_so_and_leaves_the_episode_as_it_was(env):
    task = SUITE[0]
    env.reset(options={"task_id": task.task_id})
    with pytest.raises(KeyError, match="unknown tool-call task 'no-such-task'"):
        env.reset(options={"task_id": "no-such-task"})
    assert env.task is task and env.step("Done.")[2]  # the episode goes on to its end
