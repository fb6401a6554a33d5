"""The tool-call env's BFCL grading throughput against bfcl-eval's own per-entry grading of the same
reply text, in one run; plus multi-turn episode cost and the bundled suite's episode steps/s.

- Single-turn (the headline): a fixed set of entries from every single-turn category, each with its
  reference reply and four perturbed replies (wrong value, missing argument, extra call, wrong
  function). Baseline: bfcl-eval's `_evaluate_single_ast_entry` / `_evaluate_single_relevance_entry`
  with its Qwen FC decoder (decode the `<tool_call>` text, then `ast_checker`). Env: `reset` + `step`
  (parse, schema check, bfcl-eval's `ast_checker` code in the env's own instance of its module, which
  memoizes its name conversion and string standardization; next state, labels, outcome). Both must
  agree on every verdict. "distinct": every reply is new to the env (its verdict memo cleared each round);
  "group of 8": each entry answered by 8 samples drawn from its 5 variants, as a GRPO group would
  (repeats are graded once by the env, every time by the baseline).
- Multi-turn: oracle episodes (every call executed live on bfcl-eval's API classes, then graded by
  `multi_turn_checker`) vs `multi_turn_checker` alone on the same calls. The env does strictly more
  (the live execution is the next state), so this ratio is below 1 by construction.
- Bundled: oracle episodes (reset + every step + grading), steps/s; with Docker, also the python tasks.
Rounds alternate baseline and env so that machine noise hits both; ratios are medians over rounds.
The single-turn line is followed by where the time goes on each side (`where_the_time_goes`) and by a
steady loop (`steady_state`): the median of 15 rounds hides what a long grading loop pays now and
then, full garbage collections of the whole heap, so the env grades the same replies for STEADY_ROUNDS
rounds and reports its time per reply with the collector's share of it.
Ends with one JSON line.
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
ROUNDS = 15  # one round's ratio moved by +-8% on this machine, the median of 15 rounds by about +-2%
GROUP = 8
STEADY_ROUNDS = 200  # ~6 s; a full collection came every ~30 rounds when the memo held tracked objects


def make_env(suite: str) -> ToolCallEnv:
    cfg = compose(["env=toolcall", f"env.suite={suite}"])
    return ToolCallEnv(typed(cfg.env, ToolCallEnvConfig), typed(cfg.sandbox, SandboxConfig), split="all",
                       run_id="bench-toolcall")


def variants(task) -> list[str]:
    """The reference reply and four wrong ones (the same perturbations as tests/envs/toolcall/bfcl/test_toolcall_bfcl.py)."""
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


def compare(env, grade, model, work, clear_memo: bool) -> tuple[float, float, float, list[float]]:
    """(median ratio baseline_time/env_time, best env s/reply, best baseline s/reply, the middle half
    of the rounds' ratios) over ROUNDS."""
    ratios, t_env, t_raw = [], [], []
    for _ in range(ROUNDS):
        if clear_memo:
            S._VERDICTS.clear()
        te = timed(lambda: [env_grade(env, t, r) for t, r in work])
        tr = timed(lambda: [grade(t, r, model) for t, r in work])
        ratios.append(tr / te)
        t_env.append(te / len(work))
        t_raw.append(tr / len(work))
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    return statistics.median(ratios), min(t_env), min(t_raw), [round(q1, 3), round(q3, 3)]


def where_the_time_goes(env, grade, model, work) -> dict:
    """Each side split in two, for reading the headline: bfcl-eval's decoder and its checker alone
    (the rest of its time is `_evaluate_single_ast_entry`'s own); the env's judging of a reply
    (`SingleTurnEpisode.judge`: scan, the checker, the explanation, the judged result) against
    bfcl-eval's whole grading (the rest of the env's time is the memo, the info dict, reset and step);
    and the env's instance of the checker (`toolcall_bfcl_check`) on the same decoded calls.
    Best round of ROUNDS each, so the parts are comparable with each other but not summed to medians."""
    from bfcl_eval.constants.enums import Language, ReturnFormat
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
    from bfcl_eval.eval_checker.eval_runner import get_handler

    from envs.toolcall.bfcl.check import checked, entry_inputs

    handler = get_handler("Qwen/Qwen3-8B-FC")

    def decode(reply):
        try:
            return handler.decode_ast(reply, ReturnFormat.PYTHON, False)
        except Exception:
            return None

    checks, env_checks = [], []
    for task, reply in work:
        category = task.data["category"]
        decoded = decode(reply)
        if category not in B.NO_CALL_EXPECTED and decoded:
            checks.append((B.entries(category, False)[task.task_id]["function"], decoded,
                           B.answers(category)[task.task_id], category))
            env_checks.append((entry_inputs(category, task.task_id, model),
                               [(n, a) for call in decoded for n, a in call.items()], category))
    episodes = []
    for task, reply in work:
        env.reset(options={"task_id": task.task_id})
        episodes.append((env._episode, reply))

    def best(fn) -> float:
        return min(timed(fn) for _ in range(ROUNDS)) / len(work) * 1e6

    judge_us = best(lambda: [ep.judge(r) for ep, r in episodes])
    whole_us = best(lambda: [grade(t, r, model) for t, r in work])
    return {"bfcl_decode_us": best(lambda: [decode(r) for _, r in work]),
            "bfcl_checker_us": best(lambda: [ast_checker(f, d, a, Language.PYTHON, c, model) for f, d, a, c in checks]),
            "env_checker_us": best(lambda: [checked(e, p, c, model) for e, p, c in env_checks]),
            "env_judge_us": judge_us, "judge_ratio": whole_us / judge_us}


def steady_state(env, work) -> dict:
    """The env's time per reply over STEADY_ROUNDS rounds (the memo churning, as in a long run), and
    the share of it the garbage collector took, measured with its callbacks."""
    import gc

    spent, started = [0.0], [0.0]

    def on_collection(phase, info):
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            spent[0] += time.perf_counter() - started[0]

    gc.callbacks.append(on_collection)
    try:
        t0 = time.perf_counter()
        for _ in range(STEADY_ROUNDS):
            S._VERDICTS.clear()
            for t, r in work:
                env_grade(env, t, r)
        total = time.perf_counter() - t0
    finally:
        gc.callbacks.remove(on_collection)
    return {"steady_env_us": total / STEADY_ROUNDS / len(work) * 1e6, "steady_gc_share": spent[0] / total}


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
    ratio, env_s, raw_s, spread = compare(env, grade, model, work, clear_memo=True)
    parts = where_the_time_goes(env, grade, model, work)
    g_ratio, g_env_s, g_raw_s, _ = compare(env, grade, model, groups, clear_memo=True)
    steady = steady_state(env, work)
    env.close()
    n_tasks = len({t.task_id for t, _ in work})
    print(f"single-turn, {len(work)} distinct replies to {n_tasks} entries (verdicts agree on all)")
    print(f"  bfcl-eval decode+check {raw_s * 1e6:6.1f} us/reply   env reset+step {env_s * 1e6:6.1f} us/reply   "
          f"ratio {ratio:.2f}x (target >= 1.0; middle half of {ROUNDS} rounds {spread[0]:.2f}-{spread[1]:.2f})")
    print(f"  where it goes, us/reply: bfcl-eval decode {parts['bfcl_decode_us']:.1f} + checker "
          f"{parts['bfcl_checker_us']:.1f} (the env's instance of it: {parts['env_checker_us']:.1f}) + the rest "
          f"{raw_s * 1e6 - parts['bfcl_decode_us'] - parts['bfcl_checker_us']:.1f}; "
          f"env judging (scan, checker, explanation, result) {parts['env_judge_us']:.1f} "
          f"(bfcl-eval's whole grading takes {parts['judge_ratio']:.2f}x that) + memo, info, reset and step "
          f"{env_s * 1e6 - parts['env_judge_us']:.1f}")
    print(f"  group of {GROUP} per entry ({len(groups)} replies): bfcl-eval {g_raw_s * 1e6:6.1f} us   "
          f"env {g_env_s * 1e6:6.1f} us   ratio {g_ratio:.2f}x")
    print(f"  steady loop, {STEADY_ROUNDS} rounds: env {steady['steady_env_us']:.1f} us/reply, "
          f"{steady['steady_gc_share']:.1%} of it in garbage collection")
    return {"ratio": ratio, "spread": spread, "env_us": env_s * 1e6, "bfcl_us": raw_s * 1e6, "group_ratio": g_ratio,
            "n_replies": len(work), **parts, **steady}


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
        "metric": "toolcall_bfcl_single_turn_grading_throughput_vs_bfcl_eval", "value": round(st["ratio"], 3),
        "target": 1.0, "higher_is_better": True, "value_middle_half": st["spread"],
        "group8_ratio": round(st["group_ratio"], 3), "env_us_per_reply": round(st["env_us"], 1),
        "bfcl_eval_us_per_reply": round(st["bfcl_us"], 1), "replies": st["n_replies"],
        "env_judging_vs_bfcl_eval": round(st["judge_ratio"], 3), "env_judge_us": round(st["env_judge_us"], 1),
        "bfcl_decode_us": round(st["bfcl_decode_us"], 1), "bfcl_checker_us": round(st["bfcl_checker_us"], 1),
        "env_checker_us": round(st["env_checker_us"], 1), "steady_env_us_per_reply": round(st["steady_env_us"], 1),
        "steady_gc_share": round(st["steady_gc_share"], 3),
        "multi_turn_episode_vs_checker_only": round(mt["ratio"], 3),
        "multi_turn_steps_per_s": round(mt["steps_per_s"]),
        "bundled_steps_per_s": round(bu["no_python"]) if "no_python" in bu else None,
        "bundled_python_steps_per_s": round(bu["python"]) if "python" in bu else None,
    }))


if __name__ == "__main__":
    main()
