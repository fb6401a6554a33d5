"""What BFCL grading costs the tool-call env, per reply, and its share of an agent step: a report, with
no target (grading is far below a model reply's cost, so it is not worth tuning). Also the multi-turn
episode cost and the bundled suite's episode steps/s.

- Single-turn (the headline): a fixed set of entries from every single-turn category, each with its
  reference reply and four perturbed replies (wrong value, missing argument, extra call, wrong
  function). The env's `reset` + `step` (parse, schema check, bfcl-eval's `ast_checker`, next state,
  labels, outcome) per reply, "distinct" (every reply new to the env: its verdict memo cleared each
  round) and "group of 8" (each entry answered by 8 samples drawn from its variants, as a GRPO group
  would: repeats come from the memo). First the env's verdicts are checked against bfcl-eval's own
  per-entry grading of the same reply text (`_evaluate_single_ast_entry` /
  `_evaluate_single_relevance_entry` with its Qwen FC decoder), whose time per reply is printed too.
- Share of an agent step: grading / (grading + one model reply). A model reply is not measured here
  (no model is loaded); its cost is ASSUMED_REPLY_S, an assumption: see there.
- Multi-turn: oracle episodes (every call executed live on bfcl-eval's API classes, then graded by
  `multi_turn_checker`) vs `multi_turn_checker` alone on the same calls.
- Bundled: oracle episodes (reset + every step + grading), steps/s; with Docker, also the python tasks.
Times are the best of ROUNDS rounds. Ends with one JSON line.
"""
from __future__ import annotations

import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envs.sandbox import SandboxConfig, wait_for_background_removals  # noqa: E402
from envs.toolcall.bfcl import single as S  # noqa: E402
from envs.toolcall.bfcl import suite as B  # noqa: E402
from envs.toolcall.env import ToolCallEnv, ToolCallEnvConfig  # noqa: E402
from envs.toolcall.parse import ToolCall, render_calls  # noqa: E402
from nextstate.config import compose, typed  # noqa: E402

PER_CATEGORY = 60
ROUNDS = 5
GROUP = 8
# One model reply (an agent step's generation), assumed, not measured: a lower bound of
# 50 ms (a short tool call decoded by a served model; the repo's recorded chat runs,
# results/multirun/demo-*, took 3.5-27 s per reply on their machine).
ASSUMED_REPLY_S = 0.050


def make_env(suite: str) -> ToolCallEnv:
    cfg = compose(["env=toolcall", f"env.suite={suite}"])
    return ToolCallEnv(typed(cfg.env, ToolCallEnvConfig), typed(cfg.sandbox, SandboxConfig), split="all",
                       run_id="bench-toolcall")


def variants(task) -> list[str]:
    """The reference reply and four wrong ones (the perturbations of
    tests/envs/toolcall/bfcl/test_toolcall_bfcl.py)."""
    category = task.data["category"]
    if category in B.NO_CALL_EXPECTED:
        fn = B.entries(category, False)[task.task_id]["function"][0]["name"].replace(".", "_")
        return [B.reference_actions(task)[0], ToolCall(fn, {}).render()]
    calls = B.reference_calls(category, task.task_id)
    first, rest = calls[0], calls[1:]
    spec, _ = B.specs(category, task.task_id)
    out = [render_calls(calls), render_calls([*calls, calls[-1]])]
    if first.arguments:
        arg, value = next(iter(first.arguments.items()))
        wrong = "zz" if isinstance(value, str) else (not value if isinstance(value, bool) else
                                                     value + 7919 if isinstance(value, (int, float)) else None)
        out.append(render_calls([ToolCall(first.name, {**first.arguments, arg: wrong}), *rest]))
    required = [a for a in spec[first.name].required if a in first.arguments]
    if required:
        out.append(render_calls([ToolCall(first.name, {k: v for k, v in first.arguments.items()
                                                       if k != required[0]}), *rest]))
    other = next((n for n in spec if n != first.name), "not_a_function")
    out.append(render_calls([ToolCall(other, first.arguments), *rest]))
    return out


def bfcl_grader():
    """bfcl-eval's own per-entry grading of a raw reply (decode with its Qwen FC handler, check)."""
    from bfcl_eval.constants.enums import Language, ReturnFormat
    from bfcl_eval.eval_checker.eval_runner import (
        _evaluate_single_ast_entry,
        _evaluate_single_relevance_entry,
        get_handler,
    )

    handler = get_handler("Qwen/Qwen3-8B-FC")  # its decoder reads <tool_call>{json}</tool_call>

    def grade(task, reply: str, model: str) -> bool:
        category = task.data["category"]
        entry = B.entries(category, False)[task.task_id]
        if category in B.NO_CALL_EXPECTED:
            return _evaluate_single_relevance_entry(handler, task.task_id, reply, entry, model, category)["valid"]
        return _evaluate_single_ast_entry(handler, task.task_id, reply, B.answers(category)[task.task_id], entry,
                                          model, category, Language.PYTHON, ReturnFormat.PYTHON)["valid"]
    return grade


def env_grade(env, task, reply: str) -> bool:
    env.reset(options={"task_id": task.task_id})
    return env.step(reply)[1] == 1.0


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def best_us(work, fn, before_round=lambda: None) -> float:
    """The best of ROUNDS rounds of `fn` over `work`, in us per reply."""
    def one_round():
        before_round()
        for t, r in work:
            fn(t, r)
    return min(timed(one_round) for _ in range(ROUNDS)) / len(work) * 1e6


def single_turn() -> dict:
    env = make_env("+".join(f"bfcl_{c}" for c in B.SINGLE_TURN))
    env.prepare()  # bfcl-eval's checker import (~5 s) before the clock
    model = env.config.bfcl_checker_model
    grade = bfcl_grader()
    work, groups = [], []
    rng = random.Random(0)
    for category in B.SINGLE_TURN:
        tasks = [t for t in env.tasks if t.data["category"] == category]
        for task in tasks[:: max(1, len(tasks) // PER_CATEGORY)][:PER_CATEGORY]:
            v = variants(task)
            work += [(task, r) for r in v]
            groups += [(task, rng.choice(v)) for _ in range(GROUP)]
    disagree = [(t.task_id, r) for t, r in work if env_grade(env, t, r) != grade(t, r, model)]
    if disagree:
        raise SystemExit(f"env and bfcl-eval disagree on {len(disagree)} replies, e.g. {disagree[:3]}")

    # the memo is cleared before each round: distinct replies all miss it, a group's repeats hit it
    env_us = best_us(work, lambda t, r: env_grade(env, t, r), S.judge_memo.cache_clear)
    group_us = best_us(groups, lambda t, r: env_grade(env, t, r), S.judge_memo.cache_clear)
    bfcl_us = best_us(work, lambda t, r: grade(t, r, model))
    env.close()
    share = env_us * 1e-6 / (env_us * 1e-6 + ASSUMED_REPLY_S)
    n_tasks = len({t.task_id for t, _ in work})
    print(f"single-turn, {len(work)} distinct replies to {n_tasks} entries (verdicts agree with bfcl-eval's on all)")
    print(f"  env reset+step {env_us:6.1f} us/reply = {share:.3%} of an agent step, taking a model reply as "
          f"{ASSUMED_REPLY_S * 1e3:.0f} ms (assumed, not measured: see ASSUMED_REPLY_S)")
    print(f"  group of {GROUP} per entry ({len(groups)} replies, repeats from the memo): env {group_us:6.1f} us/reply")
    print(f"  for reference, bfcl-eval's own decode+check of the same replies: {bfcl_us:6.1f} us/reply")
    return {"env_us": env_us, "share": share, "group_us": group_us, "bfcl_us": bfcl_us, "n_replies": len(work)}


def multi_turn(n: int = 40) -> dict:
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker
    from bfcl_eval.model_handler.utils import convert_to_function_call

    from agents.base import OracleAgent
    from agents.rollout import run_episode
    from envs.toolcall.bfcl.multi import MultiTurnEpisode, reference_turns

    env = make_env("bfcl_multi_turn_base")
    tasks = env.tasks[:: len(env.tasks) // n][:n]
    decoded = {t.task_id: [[convert_to_function_call([{c.name: c.arguments} for c in turn])] if turn else []
                           for turn in reference_turns("multi_turn_base", t.task_id)] for t in tasks}

    def checker_only():
        for t in tasks:
            name = f"bench_{t.task_id}"
            entry = B.entries("multi_turn_base", False)[t.task_id]
            assert multi_turn_checker(decoded[t.task_id], B.answers("multi_turn_base")[t.task_id], entry,
                                      "multi_turn_base", name)["valid"]
            MultiTurnEpisode._forget(name)

    steps = 0

    def episodes():
        nonlocal steps
        for t in tasks:
            traj = run_episode(env, OracleAgent(), t, "system")
            assert traj.success
            steps += len(traj.steps)

    ratios, t_env = [], []
    for _ in range(ROUNDS):
        steps = 0
        te, tc = timed(episodes), timed(checker_only)
        ratios.append(tc / te)
        t_env.append(te)
    env.close()
    ratio = statistics.median(ratios)
    print(f"multi-turn, {len(tasks)} entries: env episode (live execution + grading) vs checker alone "
          f"{ratio:.2f}x; {steps / min(t_env):.0f} steps/s")
    return {"ratio": ratio, "steps_per_s": steps / min(t_env)}


def bundled() -> dict:
    from agents.base import OracleAgent
    from agents.rollout import run_episode

    env = make_env("bundled")
    out = {}
    for label, tasks in (("no_python", [t for t in env.tasks if "python" not in t.data["toolsets"]]),
                         ("python", [t for t in env.tasks if "python" in t.data["toolsets"]])):
        best = None
        try:
            for _ in range(ROUNDS if label == "no_python" else 2):
                steps, t0 = 0, time.perf_counter()
                for t in tasks:
                    traj = run_episode(env, OracleAgent(), t, "system")
                    assert traj.success and not traj.infra_failure, (t.task_id, traj.infra_reason)
                    steps += len(traj.steps)
                rate = steps / (time.perf_counter() - t0)
                best = max(best or 0.0, rate)
        except Exception as e:  # no Docker: the python tasks are skipped, not failed
            print(f"bundled {label}: skipped ({e})")
            continue
        out[label] = best
        print(f"bundled, {len(tasks)} {label} tasks (oracle): {best:.0f} steps/s")
    env.close()
    wait_for_background_removals()
    return out


def main() -> None:
    st = single_turn()
    mt = multi_turn()
    bu = bundled()
    print(json.dumps({
        "metric": "toolcall_bfcl_single_turn_grading_us_per_reply", "value": round(st["env_us"], 1),
        "target": None, "higher_is_better": False, "share_of_agent_step": round(st["share"], 6),
        "assumed_model_reply_ms": ASSUMED_REPLY_S * 1e3, "group8_us_per_reply": round(st["group_us"], 1),
        "bfcl_eval_us_per_reply": round(st["bfcl_us"], 1), "replies": st["n_replies"],
        "multi_turn_episode_vs_checker_only": round(mt["ratio"], 3),
        "multi_turn_steps_per_s": round(mt["steps_per_s"]),
        "bundled_steps_per_s": round(bu["no_python"]) if "no_python" in bu else None,
        "bundled_python_steps_per_s": round(bu["python"]) if "python" in bu else None,
    }))


if __name__ == "__main__":
    main()
