"""BFCL through the tool-call env, graded by bfcl-eval's own checkers (no Docker): the reference
passes for every entry of every category (except the listed broken ground truths), perturbed answers
(wrong value, missing argument, extra call, wrong function) fail, irrelevance is "no call",
multi-turn runs against bfcl-eval's API classes with per-step labels, limits and clean-up."""
import dataclasses
import enum
import json

import pytest

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


@pytest.mark.slow
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


def test_a_repeated_reply_gets_the_step_a_fresh_one_gets(env):
    """The memo's answer (a repeat) against a fresh judging (memo cleared) on every reply kind: the same
    observation, reward, next state, labels and verdict; a second answer is not graded again."""
    for category in B.SINGLE_TURN:
        for task in sample(env, category, 4):
            for reply in _replies(env, task):
                S.judge_memo.cache_clear()
                env.reset(options={"task_id": task.task_id})
                fresh = env.step(reply)
                env.reset(options={"task_id": task.task_id})
                repeat = env.step(reply)
                assert S.judge_memo.cache_info().hits == 1
                assert fresh == repeat, (task.task_id, reply)
                assert env.step(reply)[1:4] == (0.0, True, False)  # a second answer is not graded again


def test_a_new_episode_does_not_inherit_the_last_answer(env):
    """A reset starts a fresh episode, even for the same task: it must not inherit a grade."""
    task = sample(env, "simple_python")[0]
    assert grade(env, task, env.reference_actions(task)[0])[0] == 1.0
    first = env._episode
    obs, info = env.reset(options={"task_id": task.task_id})
    assert env._episode is not first and obs == task.instruction
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


def _bfcl_data(category):
    """bfcl-eval's un-hinted entries and ground truth, loaded here with its own loaders (not the env's)."""
    from bfcl_eval.utils import load_dataset_entry, load_ground_truth_entry

    functions = {e["id"]: e["function"] for e in load_dataset_entry(category, include_prereq=False,
                                                                    include_language_specific_hint=False)}
    return functions, {g["id"]: g["ground_truth"] for g in load_ground_truth_entry(category)}


def test_the_env_gives_bfcl_evals_own_verdicts_and_messages(env, config):
    """bfcl-eval's own `ast_checker`, called here on its own data, against the env: `check_single` on
    the same calls returns the checker's whole verdict, and a step's outcome, error type and report
    carry it (names mapped back from their OpenAI spelling, as the env does)."""
    from bfcl_eval.constants.enums import Language
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker

    from envs.toolcall.bfcl.check import check_single

    model, seen, restyled_valid = config.bfcl_checker_model, 0, 0
    for category in SINGLE:
        functions, truth = _bfcl_data(category)
        dotted = [t for t in env.tasks if t.data["category"] == category  # names the checker converts
                  and any("." in f["name"] for f in functions[t.task_id])]
        for task in sample(env, category) + dotted[:: max(1, len(dotted) // 6)][:6]:
            _, aliases = B.specs(category, task.task_id)
            reference = B.reference_calls(category, task.task_id)
            cases = [reference, *(calls for _, calls in perturbations(task))]
            restyled = _restyled(reference)
            for calls in cases + ([restyled] if restyled else []):
                for pairs in ([(c.name, c.arguments) for c in calls],
                              [(aliases.get(c.name, c.name), c.arguments) for c in calls]):
                    try:
                        want = ast_checker(functions[task.task_id], [{n: a} for n, a in pairs], truth[task.task_id],
                                           Language.PYTHON, category, model)
                    except Exception as e:
                        want = {"valid": False, "error": [f"checker raised {type(e).__name__}: {e}"],
                                "error_type": "checker_exception"}
                    assert check_single(category, task.task_id, pairs, model) == want, (task.task_id, calls)
                reward, info = grade(env, task, render_calls(calls))  # `want` is now the mapped names' verdict
                assert (reward == 1.0) == bool(want["valid"]) == info["success"], (task.task_id, calls)
                assert info["step_label"]["matches_reference"] == bool(want["valid"])
                assert info["bfcl_error_type"] == want.get("error_type")
                if want["valid"]:
                    assert info["test_output"] == "valid"
                else:
                    first = want["error"][0] if isinstance(want["error"], list) else want["error"]
                    first = first if isinstance(first, str) else repr(first)
                    assert info["test_output"] == f"{want['error_type']}: {first[:1000]}", (task.task_id, calls)
                seen += 1
                restyled_valid += calls is restyled and bool(want["valid"])
    assert seen > 700 and restyled_valid > 80  # restyled strings exercise standardization on both sides


def test_bfcl_evals_checker_module_is_called_as_shipped(env):
    """The env imports bfcl-eval's checker module and leaves it as it is: nothing memoized or replaced."""
    import importlib

    from envs.toolcall.bfcl.check import checker_module

    stock = importlib.import_module("bfcl_eval.eval_checker.ast_eval.ast_checker")
    assert checker_module() is stock
    assert not hasattr(stock.convert_func_name, "cache_info") and not hasattr(stock.standardize_string, "cache_info")
    assert isinstance(stock.Language.PYTHON, enum.Enum)


def test_the_verdict_memo_serves_repeats_of_the_exact_reply(env):
    """A repeat of a reply (word for word) is a memo hit; any other text, even one space more, is judged."""
    S.judge_memo.cache_clear()
    task = sample(env, "multiple")[0]
    reply = env.reference_actions(task)[0]
    for text in (reply, reply, reply + " ", reply):
        grade(env, task, text)
    info = S.judge_memo.cache_info()
    assert (info.hits, info.misses, info.currsize) == (2, 2, 2)


def test_the_verdict_memo_is_bounded(env):
    S.judge_memo.cache_clear()
    task = sample(env, "simple_python")[0]
    for i in range(6):
        grade(env, task, f"answer {i}")
    info = S.judge_memo.cache_info()
    assert info.maxsize == S.MEMO_SIZE and 0 < S.MEMO_SIZE <= 100_000 and info.currsize == 6


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


def test_tools_for_multi_turn_are_the_involved_classes(env):
    task = _fs_tasks(env)[0]
    names = {t["function"]["name"] for t in env.tools_for(task)}
    assert {"cd", "ls", "mv", "touch"} <= names
    json.dumps(env.tools_for(task))  # serializable for the chat template
