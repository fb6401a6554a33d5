"""Attacks on the tool-call env's line between the agent's faults and the harness's.

An agent's own unbounded reply (JSON nested 100,000 deep, 100,000 calls in one reply, results too
large, tools that never return) gets a clear error next state and stays the agent's episode, scored
as usual; the caps are conf/env/toolcall.yaml's. An env whose step raises anyway is the harness's
failure: the rollout records an unscored infra-failure episode with the evidence, and a run through
`python -m harness.run` still ends with its trajectories and a leaderboard row."""
import dataclasses
import json
import time
from pathlib import Path

import pytest

import envs  # noqa: F401
from agents.base import ReplayAgent
from agents.rollout import run_episode
from envs.toolcall.bfcl import single as S
from envs.toolcall.env import ToolCallEnv
from envs.toolcall.parse import MAX_DEPTH, parse_reply, scan_calls
from nextstate.atomic import read_jsonl
from nextstate.leaderboard import read_rows
from tests.envs.toolcall.helpers import SUITE

pytestmark = pytest.mark.red_team

NOTES_TASK = next(t for t in SUITE if t.data["toolsets"] == ("notes",))
PYTHON_TASK = "py-fibonacci"
DEPTH = 100_000


def call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def deep_reply(depth: int = DEPTH) -> str:
    return ('<tool_call>{"name": "search_notes", "arguments": {"query": ' + "[" * depth + "]" * depth
            + "}}</tool_call>")


def capped_env(config, sandbox_config, **caps) -> ToolCallEnv:
    return ToolCallEnv(dataclasses.replace(config, **caps), sandbox_config, tasks=SUITE,
                       run_id="pytest-red-team-toolcall-caps")


# -- nesting --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 1_000, DEPTH])
def test_deep_json_is_a_reason_never_an_exception(depth):
    for reply in (deep_reply(depth), "<tool_call>" + '{"a": ' * depth + "1" + "}" * depth + "</tool_call>"):
        parsed = parse_reply(reply)
        assert not parsed.calls and f"nested more than {MAX_DEPTH} levels" in parsed.error
        assert scan_calls(reply)[2] == parsed.error


def test_nesting_below_the_cap_still_parses():
    depth = MAX_DEPTH - 2  # + the call object and its arguments
    parsed = parse_reply(deep_reply(depth))
    assert parsed.error is None and len(parsed.calls) == 1


def test_deep_json_is_an_error_next_state_and_the_episode_goes_on(env):
    env.reset(options={"task_id": NOTES_TASK.task_id})
    t0 = time.monotonic()
    obs, reward, terminated, truncated, info = env.step(deep_reply())
    assert time.monotonic() - t0 < 5
    assert info["next_state"].kind == "error" and "nested more than" in obs and obs.startswith("[error]")
    assert not terminated and not truncated and not info.get("infra_failure")
    assert info["step_label"]["well_formed"] is False
    obs, *_, info = env.step(call("search_notes", query=""))  # the same episode answers the next reply
    assert info["next_state"].kind == "tool"


@pytest.mark.parametrize("suite", ["bfcl_simple_python", "bfcl_irrelevance", "bfcl_multi_turn_base"])
def test_deep_json_in_bfcl_is_graded_as_any_malformed_reply(env_config, sandbox_config, suite):
    """Single-turn: the graded answer, judged as BFCL judges an undecodable reply (wrong, except in
    irrelevance, where no decodable call is the right answer); multi-turn: the entry goes on."""
    e = ToolCallEnv(env_config("toolcall", f"env.suite={suite}"), sandbox_config, split="all",
                    run_id="pytest-red-team-bfcl")
    try:
        e.reset(options={"task_id": e.tasks[0].task_id})
        obs, reward, terminated, truncated, info = e.step(deep_reply())
        assert info["next_state"].kind == "error" and "nested more than" in obs
        assert not info.get("infra_failure")
        if suite == "bfcl_multi_turn_base":
            assert not terminated and reward == 0.0
            return
        e.reset(options={"task_id": e.tasks[0].task_id})
        malformed = e.step("<tool_call>{</tool_call>")
        assert terminated and malformed[2] and (reward, info["outcome"]) == (malformed[1], malformed[4]["outcome"])
        assert reward == (1.0 if suite == "bfcl_irrelevance" else 0.0)
    finally:
        e.close()


# -- calls per reply ----------------------------------------------------------------------------------
def test_a_hundred_thousand_calls_are_refused_whole(env, config):
    env.reset(options={"task_id": NOTES_TASK.task_id})
    before = env.step(call("search_notes", query=""))[4]["next_state"].text
    reply = "\n".join([call("create_note", title="x", body="y")] * 100_000)
    assert len(reply) > 1_000_000
    t0 = time.monotonic()
    obs, reward, terminated, truncated, info = env.step(reply)
    assert time.monotonic() - t0 < 10
    ns = info["next_state"]
    assert ns.kind == "error" and "100000 tool calls" in ns.text and "nothing was run" in ns.text
    assert f"at most {config.max_calls_per_reply}" in ns.text and len(obs) < 1_000
    assert not terminated and not info.get("infra_failure")
    assert env.step(call("search_notes", query=""))[4]["next_state"].text == before  # no note was made


def test_calls_up_to_the_cap_run(env_config, sandbox_config):
    e = ToolCallEnv(env_config("toolcall", "env.max_calls_per_reply=3"), sandbox_config, tasks=SUITE)
    try:
        e.reset(options={"task_id": NOTES_TASK.task_id})
        info = e.step("\n".join([call("search_notes", query="")] * 3))[4]
        assert info["next_state"].kind == "tool" and info["next_state"].fields["calls"] == ["search_notes"] * 3
        info = e.step("\n".join([call("search_notes", query="")] * 4))[4]
        assert info["next_state"].kind == "error" and "at most 3" in info["next_state"].text
    finally:
        e.close()


def test_too_many_calls_fail_a_bfcl_single_turn_answer(env_config, sandbox_config):
    """In irrelevance entries a reply without a call passes: a reply over the cap must not count as one."""
    e = ToolCallEnv(env_config("toolcall", "env.suite=bfcl_irrelevance"), sandbox_config, split="all")
    try:
        task = e.tasks[0]
        name = e.tools_for(task)[0]["function"]["name"]
        e.reset(options={"task_id": task.task_id})
        obs, reward, terminated, truncated, info = e.step("\n".join([call(name)] * 100_000))
        assert terminated and reward == 0.0 and not info.get("infra_failure")
        assert info["next_state"].kind == "error" and "100000 tool calls" in obs
        assert info["bfcl_error_type"] == S.TOO_MANY_CALLS
    finally:
        e.close()


# -- result bytes and tool time -------------------------------------------------------------------------
def test_results_past_the_byte_cap_stop_the_reply(config, sandbox_config):
    e = capped_env(config, sandbox_config, max_reply_obs_bytes=1_000)
    try:
        e.reset(options={"task_id": NOTES_TASK.task_id})
        one = e.step(call("search_notes", query=""))[4]["next_state"].text
        assert 200 < len(one.encode()) < 1_000, "the test needs a result of a few hundred bytes"
        obs, reward, terminated, truncated, info = e.step("\n".join([call("search_notes", query="")] * 20))
        ns = info["next_state"]
        assert ns.kind == "error" and "more than 1000 bytes" in ns.text and "were not run" in ns.text
        assert len(ns.fields["calls"]) < 20 and len(ns.fields["calls"]) + len(ns.fields["not_run"]) == 20
        assert len(obs.encode()) < 1_000 + 400 and "<tool_response>" in obs  # what ran, up to the cap
        assert not terminated and not info.get("infra_failure") and info["step_label"]["executed_ok"] is False
    finally:
        e.close()


@pytest.mark.docker
def test_endless_python_calls_stop_at_the_time_cap(config, sandbox_config, terminal_image):
    """Before the cap, 5 endless loops in one reply held the env for 5 timeouts (50 s by default)."""
    e = capped_env(config, sandbox_config, python_timeout_s=1, max_reply_tool_s=2)
    try:
        e.reset(options={"task_id": PYTHON_TASK})
        e.step(call("run_python", code="print(1)"))  # the sandbox starts outside the timed reply
        t0 = time.monotonic()
        obs, reward, terminated, truncated, info = e.step("\n".join([call("run_python", code="while True: pass")] * 5))
        elapsed = time.monotonic() - t0
        ns = info["next_state"]
        assert ns.kind == "error" and "more than 2 s" in ns.text and ns.fields["not_run"], ns.text
        assert 2 <= len(ns.fields["calls"]) <= 3 and elapsed < 2 + 1 + 5, (elapsed, ns.fields)
        assert not terminated and not info.get("infra_failure")
    finally:
        e.close()


@pytest.mark.docker
def test_the_last_call_gets_only_what_is_left_of_the_reply_time(config, sandbox_config, terminal_image):
    """A call started inside the budget does not run for its own timeout (python_timeout_s, here 8 s)
    past it, which would take the reply to ~10 s against a 2 s cap when one endless call follows a
    slow one: that call's timeout is what is left of the 2 s."""
    e = capped_env(config, sandbox_config, python_timeout_s=8, max_reply_tool_s=2)
    try:
        e.reset(options={"task_id": PYTHON_TASK})
        e.step(call("run_python", code="print(1)"))  # the sandbox starts outside the timed reply
        reply = "\n".join([call("run_python", code="import time; time.sleep(1); print('slept')"),
                           call("run_python", code="while True: pass")])
        t0 = time.monotonic()
        obs, reward, terminated, truncated, info = e.step(reply)
        elapsed = time.monotonic() - t0
        assert elapsed < 2 + 1 + 1.5, elapsed  # the cap, `timeout`'s grace second, Docker's round trips
        ns = info["next_state"]
        assert ns.fields["calls"] == ["run_python"] * 2 and "slept" in ns.text, ns.text
        assert "what was left of the reply's 2 s of tool time" in ns.text, ns.text
        assert not terminated and not info.get("infra_failure")
    finally:
        e.close()


@pytest.mark.docker
def test_one_endless_call_stops_at_the_reply_time_cap(config, sandbox_config, terminal_image):
    e = capped_env(config, sandbox_config, python_timeout_s=8, max_reply_tool_s=1)
    try:
        e.reset(options={"task_id": PYTHON_TASK})
        e.step(call("run_python", code="print(1)"))
        t0 = time.monotonic()
        info = e.step(call("run_python", code="while True: pass"))[4]
        assert time.monotonic() - t0 < 1 + 1 + 1.5
        assert "timed out after 1 s" in info["next_state"].text, info["next_state"].text
    finally:
        e.close()


# -- an env that raises anyway --------------------------------------------------------------------------
def test_an_exception_out_of_step_is_a_recorded_infra_failure(env, config, monkeypatch):
    from envs.toolcall.bundled import BundledEpisode

    def broken(self, parsed):
        raise RecursionError("maximum recursion depth exceeded (a bug the caps did not foresee)")

    monkeypatch.setattr(BundledEpisode, "on_calls", broken)
    traj = run_episode(env, ReplayAgent([call("search_notes", query="")]), NOTES_TASK, config.system_prompt)
    assert traj.infra_failure and not traj.success and traj.outcome == 0.0
    assert traj.infra_reason.startswith("env.step raised RecursionError: maximum recursion depth")
    assert "broken" in traj.info["infra_traceback"]  # the evidence: where it was raised
    last = traj.steps[-1]
    assert last.action_text == call("search_notes", query="") and last.next_state.kind == "error"
    assert "infrastructure failure" in last.next_state.text
    monkeypatch.undo()
    traj = run_episode(env, ReplayAgent([call("search_notes", query="")], then="Done."), NOTES_TASK,
                       config.system_prompt)  # the next episode on the same env works
    assert not traj.infra_failure and traj.steps[0].next_state.kind == "tool"


def test_an_exception_out_of_reset_is_a_recorded_infra_failure(env, config, monkeypatch):
    """reset (or the task's reference and tools, read at the start) raising ends that episode as an
    unscored infra failure with its traceback, before the agent acts; the next episode works."""
    def broken(self, task):
        raise OSError("the task's data went missing (a bug the env did not foresee)")

    monkeypatch.setattr(type(env), "reference_actions", broken)
    agent = ReplayAgent([call("search_notes", query="")])
    traj = run_episode(env, agent, NOTES_TASK, config.system_prompt)
    assert traj.infra_failure and not traj.success and traj.steps == []
    assert traj.infra_reason == ("env.reference_actions raised OSError: the task's data went missing "
                                 "(a bug the env did not foresee)")
    assert "broken" in traj.info["infra_traceback"]
    monkeypatch.undo()
    traj = run_episode(env, ReplayAgent([call("search_notes", query="")], then="Done."), NOTES_TASK,
                       config.system_prompt)
    assert not traj.infra_failure and traj.steps[0].next_state.kind == "tool"


def test_cli_run_survives_a_deeply_nested_reply(tmp_path, harness_run):
    """A RecursionError out of ToolCallEnv.step must not end `harness.run` (no trajectories, no row)."""
    reply = tmp_path / "reply.txt"
    reply.write_text(deep_reply())
    p = harness_run(tmp_path, "env=toolcall", "split=test", "exclude_tags=[python]", "limit=2", "parallel=2",
                    "agent=noop", "agent.name=reply_agent", "agent._target_=tests.fixtures.reply_agent.ReplyAgent",
                    f"+agent.reply_file={reply}", timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    _, rows = read_rows(tmp_path / "leaderboard.csv")
    assert len(rows) == 1 and rows[0]["agent"] == "reply_agent" and rows[0]["n_tasks"] == "2"
    assert rows[0]["infra_failures"] == "0" and float(rows[0]["success_rate"]) == 0.0
    trajs = read_jsonl(Path(rows[0]["run_dir"]) / "trajectories.jsonl")
    assert len(trajs) == 2
    for t in trajs:
        assert not t["infra_failure"] and t["terminated"]
        first = t["steps"][0]["next_state"]
        assert first["kind"] == "error" and f"nested more than {MAX_DEPTH} levels" in first["text"]
