"""BFCL through the tool-call env, graded by bfcl-eval's own checkers (no Docker): the reference
passes for every entry of every category (except the listed broken ground truths), perturbed answers
(wrong value, missing argument, extra call, wrong function) fail, irrelevance is "no call",
multi-turn runs against bfcl-eval's API classes with per-step labels, limits and clean-up."""
import dataclasses
import enum
import json

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import envs  # noqa: F401
from agents.base import NoopAgent, OracleAgent
from agents.rollout import run_episode
from envs.limits import EpisodeLimits
from envs.toolcall.bfcl import single as S
from envs.toolcall.bfcl import suite as B
from envs.toolcall.bfcl.multi import _utils, reference_turns
from envs.toolcall.env import ToolCallEnv, ToolCallEnvConfig
from envs.toolcall.parse import ToolCall, render_calls
from nextstate.config import compose, typed

SINGLE = [c for c in B.SINGLE_TURN if c not in B.NO_CALL_EXPECTED]
SAMPLE = 12  # entries per category for the perturbation tests (every k-th entry, fixed)


@pytest.fixture(scope="module")
def config():
    return typed(compose(["env=toolcall", "env.suite=bfcl_all"]).env, ToolCallEnvConfig)


@pytest.fixture(scope="module")
def env(config, sandbox_config):
    e = ToolCallEnv(config, sandbox_config, split="all")
    yield e
    e.close()


def sample(env, category, n=SAMPLE):
    tasks = [t for t in env.tasks if t.data["category"] == category and t.task_id not in B.KNOWN_UNSOLVABLE]
    return tasks[:: max(1, len(tasks) // n)][:n]


def grade(env, task, reply):
    env.reset(options={"task_id": task.task_id})
    obs, reward, terminated, truncated, info = env.step(reply)
    assert terminated and not truncated
    return reward, info


def test_every_category_loads_with_ids_and_splits(env):
    by_cat = {}
    for t in env.tasks:
        by_cat.setdefault(t.data["category"], []).append(t)
    assert set(by_cat) == set(B.SINGLE_TURN + B.MULTI_TURN)
    assert len(by_cat["simple_python"]) == 400 and len(by_cat["multi_turn_base"]) == 200
    for category, tasks in by_cat.items():
        assert all(t.task_id.startswith(category + "_") for t in tasks)  # the id names category and entry
        share = sum(t.split == "test" for t in tasks) / len(tasks)
        assert 0.1 < share < 0.3, (category, share)  # bfcl_test_fraction 0.2, by a fixed hash


def test_oracle_solves_every_entry_but_the_known_broken_ones(env, config):
    failed = []
    for task in env.tasks:
        traj = run_episode(env, OracleAgent(), task, config.system_prompt)
        assert not traj.infra_failure
        if not traj.success:
            failed.append(task.task_id)
    assert sorted(failed) == sorted(B.KNOWN_UNSOLVABLE)


def test_noop_solves_only_irrelevance(env, config):
    for category in B.SINGLE_TURN + B.MULTI_TURN:
        for task in sample(env, category):
            traj = run_episode(env, NoopAgent(), task, config.system_prompt)
            assert traj.success == (category in B.NO_CALL_EXPECTED), task.task_id


def _perturb_value(v):
    if isinstance(v, bool):
        return not v
    if isinstance(v, (int, float)):
        return v + 7919
    if isinstance(v, str):
        return "zz-not-the-answer"
    if isinstance(v, list):
        return v + ["zz-extra"]
    return {"zz_unexpected": 1}


def perturbations(task):
    """(kind, calls) for each perturbation that applies to this entry."""
    calls = B.reference_calls(task.data["category"], task.task_id)
    first, rest = calls[0], calls[1:]
    spec, _ = B.specs(task.data["category"], task.task_id)
    out = []
    if first.arguments:
        arg = next(iter(first.arguments))
        wrong = {**first.arguments, arg: _perturb_value(first.arguments[arg])}
        out.append(("wrong value", [ToolCall(first.name, wrong), *rest]))
    required = [a for a in spec[first.name].required if a in first.arguments]
    if required:
        fewer = {k: v for k, v in first.arguments.items() if k != required[0]}
        out.append(("missing argument", [ToolCall(first.name, fewer), *rest]))
    out.append(("extra call", [*calls, calls[-1]]))
    other = next((n for n in spec if n != first.name), "not_a_function")
    out.append(("wrong function", [ToolCall(other, first.arguments), *rest]))
    return out


@pytest.mark.parametrize("category", SINGLE)
def test_single_turn_reference_passes_and_perturbations_fail(env, category):
    kinds = set()
    for task in sample(env, category):
        reward, info = grade(env, task, env.reference_actions(task)[0])
        assert reward == 1.0 and info["step_label"] == {"well_formed": True, "matches_reference": True}
        assert info["next_state"].kind == "tool"
        for kind, calls in perturbations(task):
            reward, info = grade(env, task, render_calls(calls))
            assert reward == 0.0 and info["success"] is False, (task.task_id, kind, info["test_output"])
            assert info["step_label"]["matches_reference"] is False
            kinds.add(kind)
    assert kinds == {"wrong value", "missing argument", "extra call", "wrong function"}


def test_irrelevance_is_no_call(env):
    for task in sample(env, "irrelevance"):
        assert grade(env, task, env.reference_actions(task)[0])[0] == 1.0
        name = env.tools_for(task)[0]["function"]["name"]
        reward, info = grade(env, task, ToolCall(name, {}).render())
        assert reward == 0.0 and info["bfcl_error_type"] == "irrelevance_error:decoder_success"
        # as in BFCL's relevance runner, a reply with no decodable call counts as "no call"
        assert grade(env, task, "<tool_call>{not json}</tool_call>")[0] == 1.0


def test_single_turn_errors_end_the_episode_with_the_reason(env):
    task = sample(env, "simple_python")[0]
    reward, info = grade(env, task, '<tool_call>{"name": "nope", "arguments": {}}</tool_call>')
    assert reward == 0.0 and info["next_state"].kind == "error" and "unknown tool 'nope'" in info["next_state"].text
    assert info["step_label"] == {"well_formed": False, "matches_reference": False}
    reward, info = grade(env, task, "<tool_call>{'name': 1}</tool_call>")
    assert reward == 0.0 and "not valid JSON" in info["next_state"].text


def test_dotted_names_become_openai_names_and_both_are_accepted(env):
    task = next(t for t in env.tasks if t.data["category"] == "simple_python"
                and "." in B.entries("simple_python", False)[t.task_id]["function"][0]["name"])
    dotted = B.entries("simple_python", False)[task.task_id]["function"][0]["name"]
    tools = env.tools_for(task)
    assert tools[0]["type"] == "function" and tools[0]["function"]["name"] == dotted.replace(".", "_")
    assert tools[0]["function"]["parameters"]["type"] == "object"
    ref = B.reference_calls("simple_python", task.task_id)[0]
    assert grade(env, task, ToolCall(dotted, ref.arguments).render())[0] == 1.0
    assert grade(env, task, ref.render())[0] == 1.0


def test_repeated_answers_reuse_the_verdict_and_labels_stay_per_step(env):
    task = sample(env, "multiple")[0]
    reply = env.reference_actions(task)[0]
    _, first = grade(env, task, reply)
    _, second = grade(env, task, reply)
    assert first["step_label"] == second["step_label"] and first["step_label"] is not second["step_label"]


def _replies(env, task):
    """The reference, its perturbations, and replies that are malformed, plain text or unknown."""
    out = [env.reference_actions(task)[0], "Plain text.", "<tool_call>{not json}</tool_call>", "",
           '<tool_call>{"name": "nope", "arguments": {}}</tool_call>']
    if task.data["category"] not in B.NO_CALL_EXPECTED:
        out += [render_calls(calls) for _, calls in perturbations(task)]
    return out


def test_the_fast_single_turn_step_gives_what_act_and_grade_give(env):
    """`answer` (reset + one call) against the generic path (act, then finalize) on every reply kind."""
    for category in B.SINGLE_TURN:
        for task in sample(env, category, 4):
            for reply in _replies(env, task):
                env.reset(options={"task_id": task.task_id})
                fast = env.step(reply)
                S._VERDICTS.clear()
                env.reset(options={"task_id": task.task_id})
                env._answer = None  # the generic path
                generic = env.step(reply)
                assert fast == generic, (task.task_id, reply)
                assert env.step(reply)[1:4] == (0.0, True, False)  # a second answer is not graded again


def test_a_kept_episode_forgets_its_answer_at_reset(env):
    """Single-turn episodes are kept per task across resets; a new episode must not inherit a grade."""
    task = sample(env, "simple_python")[0]
    assert grade(env, task, env.reference_actions(task)[0])[0] == 1.0
    first = env._episode
    obs, info = env.reset(options={"task_id": task.task_id})
    assert env._episode is first and info["setup_s"] == 0.0 and obs == task.instruction
    assert env.finalize() == (0.0, {"bfcl_error_type": "ast_decoder:decoder_failed",
                                    "test_output": "ast_decoder:decoder_failed: no function call decoded",
                                    "outcome": 0.0, "success": False})


def _restyled(calls):
    """The reference with its first string argument spelt differently (case, spaces, punctuation),
    which bfcl-eval's checker standardizes away on both sides: still right."""
    for i, call in enumerate(calls):
        for arg, value in call.arguments.items():
            if isinstance(value, str) and value:
                restyled = f" {value.upper()}-_."
                return [*calls[:i], ToolCall(call.name, {**call.arguments, arg: restyled}), *calls[i + 1:]]
    return None


def test_the_envs_checker_instance_gives_bfcl_evals_own_verdicts_and_messages(env, config):
    """The env runs its own instance of bfcl-eval's checker module, whose name conversion and string
    standardization are memoized and whose `Language` is a plain namespace of the same members: every
    verdict, error type and message is still what bfcl-eval's own module says, and bfcl-eval's module
    is left as it is."""
    from bfcl_eval.eval_checker.ast_eval import ast_checker as stock

    from envs.toolcall.bfcl.check import checked, checker_module, entry_inputs
    from envs.toolcall.bfcl.suite import answers, ast_checker, entries

    _, python = ast_checker()
    model, seen, restyled_valid = config.bfcl_checker_model, 0, 0
    for category in SINGLE:
        dotted = [t for t in env.tasks if t.data["category"] == category  # names the checker converts
                  and any("." in f["name"] for f in entries(category, False)[t.task_id]["function"])]
        for task in sample(env, category) + dotted[:: max(1, len(dotted) // 6)][:6]:
            prepared = entry_inputs(category, task.task_id, model)
            reference = B.reference_calls(category, task.task_id)
            cases = [reference, *(calls for _, calls in perturbations(task))]
            restyled = _restyled(reference)
            for calls in cases + ([restyled] if restyled else []):
                pairs = [(c.name, c.arguments) for c in calls]
                got = checked(prepared, pairs, category, model)
                want = stock.ast_checker(entries(category, False)[task.task_id]["function"],
                                         [{n: a} for n, a in pairs], answers(category)[task.task_id], python,
                                         category, model)
                assert got == want, (task.task_id, calls)
                seen += 1
                restyled_valid += calls is restyled and got["valid"]
    assert seen > 700 and restyled_valid > 80  # restyled strings exercise standardization on both sides
    assert checker_module() is not stock and stock.standardize_string.__module__ == stock.__name__
    assert not hasattr(stock.convert_func_name, "cache_info") and not hasattr(stock.standardize_string, "cache_info")
    mine = checker_module()
    assert mine.standardize_string.cache_info().hits > 1000  # strings repeat within and across checks
    assert isinstance(stock.Language.PYTHON, enum.Enum) and mine.Language.PYTHON is stock.Language.PYTHON


def test_the_verdict_memo_gives_the_garbage_collector_nothing_to_traverse(env):
    """The memo keeps one entry per distinct reply for the run's life. Entries holding objects the
    collector tracks (a NamedTuple, a NextState) are traversed by every collection and, promoted to
    the oldest generation, trigger full collections of the whole heap: 7-12% of a steady grading loop's
    time. Plain tuples of strings and bools are untracked at their first collection."""
    import gc

    S._VERDICTS.clear()
    for category in B.SINGLE_TURN:
        for task in sample(env, category, 4):
            for reply in _replies(env, task):
                grade(env, task, reply)
    assert len(S._VERDICTS) > 200
    gc.collect()
    gc.collect()  # a tuple is untracked once its items are; a names tuple in an older generation needs two
    assert not [k for k, v in S._VERDICTS.items() if gc.is_tracked(v) or gc.is_tracked(k)]


def test_the_verdict_memo_is_bounded(env, monkeypatch):
    monkeypatch.setattr(S, "_MAX_VERDICTS", 3)
    S._VERDICTS.clear()
    task = sample(env, "simple_python")[0]
    replies = [f"answer {i}" for i in range(6)]
    for reply in replies:
        grade(env, task, reply)
    assert len(S._VERDICTS) == 3 and [k[-1] for k in S._VERDICTS] == replies[-3:]


# -- multi-turn -------------------------------------------------------------------------------------
def _fs_tasks(env):
    return [t for t in sample(env, "multi_turn_base", 40)
            if "GorillaFileSystem" in B.entries("multi_turn_base", False)[t.task_id]["involved_classes"]][:8]


def run_turns(env, task, turns, config, max_steps=None):
    """Play `turns` (a list of call lists per user turn), ending each turn with a plain-text reply."""
    replies = []
    for calls in turns:
        if calls:
            replies.append(render_calls(calls))
        replies.append("Done.")
    agent = type("Scripted", (), {"name": "s", "begin": lambda s, *a: None,
                                  "act": lambda s, m, tools=None: _gen(replies.pop(0))})()
    e = EpisodeLimits(env, max_steps=max_steps) if max_steps else env
    return run_episode(e, agent, task, config.system_prompt)


def _gen(text):
    from nextstate.types import Generation
    return Generation(text=text, token_ids=[], logprobs=[])


def test_multi_turn_runs_on_bfcl_api_classes_with_step_labels(env, config):
    task = _fs_tasks(env)[0]
    traj = run_episode(env, OracleAgent(), task, config.system_prompt)
    assert traj.success
    turns = B.entries("multi_turn_base", False)[task.task_id]["question"]
    user_steps = [s for s in traj.steps if s.next_state.kind == "user"]
    assert len(user_steps) == len(turns)  # each turn's end brings the next request (or the end)
    assert user_steps[0].next_state.text == turns[1][0]["content"]
    tool_steps = [s for s in traj.steps if s.next_state.kind == "tool"]
    assert tool_steps and all(s.info["step_label"] == {"well_formed": True, "executed_ok": True,
                                                       "matches_reference": True} for s in tool_steps)
    assert "<tool_response>" in tool_steps[0].next_state.text


def test_multi_turn_perturbations_fail(env, config):
    for task in _fs_tasks(env):
        ref = [list(t) for t in reference_turns("multi_turn_base", task.task_id)]
        assert run_turns(env, task, ref, config).success
        i = next(i for i, t in enumerate(ref) if t)
        # wrong value: the turn's last call with a string argument gets another value
        j = max(k for k, c in enumerate(ref[i]) if any(isinstance(v, str) for v in c.arguments.values()))
        c = ref[i][j]
        arg = next(a for a, v in c.arguments.items() if isinstance(v, str))
        wrong = [list(t) for t in ref]
        wrong[i][j] = ToolCall(c.name, {**c.arguments, arg: "zz-not-the-answer"})
        # missing call: drop the last call of the last turn with calls
        last = max(k for k, t in enumerate(ref) if t)
        missing = [list(t) for t in ref]
        missing[last] = missing[last][:-1]
        # wrong function: an unknown name is rejected (error next state), so the call never runs
        wrong_fn = [list(t) for t in ref]
        wrong_fn[i][0] = ToolCall("not_a_function", wrong_fn[i][0].arguments)
        # extra call that changes the state
        extra = [list(t) for t in ref]
        extra[i] = [*extra[i], ToolCall("touch", {"file_name": "zz_extra.txt"})]
        for kind, turns in [("wrong value", wrong), ("missing call", missing), ("wrong function", wrong_fn),
                            ("extra call", extra)]:
            traj = run_turns(env, task, turns, config)
            assert not traj.success, (task.task_id, kind, traj.info.get("test_output"))


def test_multi_turn_extra_read_only_call_passes_as_in_bfcl(env, config):
    task = _fs_tasks(env)[0]
    ref = [list(t) for t in reference_turns("multi_turn_base", task.task_id)]
    ref[0] = [ToolCall("pwd", {}), *ref[0]]  # BFCL's response check allows extra calls
    assert run_turns(env, task, ref, config).success


def test_multi_turn_wrong_arguments_are_error_next_states(env):
    task = _fs_tasks(env)[0]
    env.reset(options={"task_id": task.task_id})
    obs, reward, terminated, truncated, info = env.step('<tool_call>{"name": "cd", "arguments": {}}</tool_call>')
    assert obs.startswith("[error]") and "missing required argument(s) 'folder'" in obs and not terminated
    obs, *_, info = env.step('<tool_call>{"name": "cd", "arguments": {"folder": "nowhere"}}</tool_call>')
    assert info["next_state"].kind == "tool" and "error" in obs  # bfcl's file system says no
    assert info["step_label"] == {"well_formed": True, "executed_ok": False, "matches_reference": False}


def test_multi_turn_cut_short_fails_like_bfcl(env, config):
    task = _fs_tasks(env)[0]
    ref = [list(t) for t in reference_turns("multi_turn_base", task.task_id)]
    traj = run_turns(env, task, ref, config, max_steps=2)
    assert traj.truncated and not traj.success and "force_terminated" in traj.info["test_output"]


def test_multi_turn_step_limit_per_turn_force_quits(config, sandbox_config):
    tight = dataclasses.replace(config, bfcl_max_steps_per_turn=1)
    task = next(t for t in ToolCallEnv(tight, sandbox_config, split="all").tasks if t.task_id == "multi_turn_base_0")
    e = ToolCallEnv(tight, sandbox_config, tasks=[task])
    e.reset(options={"task_id": task.task_id})
    *_, terminated, truncated, info = e.step(ToolCall("pwd", {}).render())
    assert not terminated
    obs, reward, terminated, truncated, info = e.step(ToolCall("pwd", {}).render())
    assert terminated and reward == 0.0 and info["bfcl_error_type"] == "multi_turn:force_terminated"
    e.close()


def test_multi_turn_episodes_are_isolated_and_leave_nothing_behind(env, config):
    task = _fs_tasks(env)[0]
    ref = [list(t) for t in reference_turns("multi_turn_base", task.task_id)]
    extra = [list(t) for t in ref]
    extra[0] = [*extra[0], ToolCall("touch", {"file_name": "zz_extra.txt"})]
    assert not run_turns(env, task, extra, config).success
    assert run_turns(env, task, ref, config).success  # the previous episode's file is gone
    env.reset(options={"task_id": task.task_id})  # closes the last episode
    assert not [k for k in vars(_utils()) if k.startswith("nextstate_")]


def test_check_env(config, sandbox_config):
    tasks = [t for t in ToolCallEnv(config, sandbox_config, split="test").tasks][::40]
    assert {t.data["kind"] for t in tasks} == {"bfcl_single", "bfcl_multi"}
    e = gym.make("nextstate/ToolCall-v0", config=config, sandbox=sandbox_config, tasks=tasks,
                 disable_env_checker=True)
    try:
        check_env(e.unwrapped, skip_render_check=True)
    finally:
        e.close()


def test_tools_for_multi_turn_are_the_involved_classes(env):
    task = _fs_tasks(env)[0]
    names = {t["function"]["name"] for t in env.tools_for(task)}
    assert {"cd", "ls", "mv", "touch"} <= names
    json.dumps(env.tools_for(task))  # serializable for the chat template
