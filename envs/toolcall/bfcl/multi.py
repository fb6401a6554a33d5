"""BFCL multi-turn entries: calls run against bfcl-eval's own stateful API classes (file system,
trading bot, travel booking ...), so every tool result is a real next state; the episode is graded by
bfcl-eval's `multi_turn_checker` (state check + response check after each user turn).

Flow, as in BFCL's inference loop: the user's first request is the first observation; each reply
with calls is executed and answered with the results; a reply without a call ends the user's turn
and the next request arrives as the next observation (kind "user"); after the last turn the episode
is graded. A turn longer than `max_steps_per_turn` replies is force-quit and the entry fails, as in
BFCL; so does an episode cut before its last turn (BFCL's "force_terminated").

bfcl-eval keeps API instances in a module-level dict keyed by model name and entry id; each episode
(and each grading) therefore uses a fresh model name and removes its instances when done.
"""
from __future__ import annotations

import ast
import functools
import importlib
import inspect
import itertools
import json
from typing import Any

from envs.toolcall.bfcl.suite import answers, entries, render_messages, specs
from envs.toolcall.bfcl.suite import tools_for as tools_for  # re-exported (`x
from envs.toolcall.episode import NOT_RUN, ParsingEpisode, ReplyCaps, Turn, call_key, capped_turn, end_turn, error_turn
from envs.toolcall.parse import ToolCall, render_calls, render_tool_responses
from envs.toolcall.validate import check_calls
from nextstate.types import NextState, Task

_serial = itertools.count()


def _utils():
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    return multi_turn_utils


@functools.lru_cache(maxsize=None)
def _signatures(classes: tuple[str, ...]) -> dict[str, inspect.Signature]:
    from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING

    out = {}
    for name in classes:
        cls = getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[name]), name)
        for method, fn in inspect.getmembers(cls, inspect.isfunction):
            if not method.startswith("_"):
                out[method] = inspect.signature(fn)
    return out


def parse_call(text: str, signatures: dict[str, inspect.Signature]) -> ToolCall:
    """A ground-truth call string (`sort('final_report.pdf')`) as a keyword call."""
    node = ast.parse(text, mode="eval").body
    params = [p for p in signatures[node.func.id].parameters if p != "self"]
    args = {params[i]: ast.literal_eval(a) for i, a in enumerate(node.args)}
    args.update({k.arg: ast.literal_eval(k.value) for k in node.keywords})
    return ToolCall(node.func.id, args)


@functools.lru_cache(maxsize=1024)
def reference_turns(category: str, entry_id: str) -> tuple[tuple[ToolCall, ...], ...]:
    sigs = _signatures(tuple(entries(category, False)[entry_id]["involved_classes"]))
    return tuple(tuple(parse_call(s, sigs) for s in turn) for turn in answers(category)[entry_id])


def reference_actions(task: Task) -> list[str]:
    replies = []
    for turn in reference_turns(task.data["category"], task.task_id):
        if turn:
            replies.append(render_calls(list(turn)))
        replies.append("Done.")
    return replies


def _is_error(result: str) -> bool:
    if result.startswith("Error during execution"):
        return True
    try:
        parsed = json.loads(result)
    except ValueError:
        return False
    return isinstance(parsed, dict) and "error" in parsed


def start_episode(task: Task, env) -> "MultiTurnEpisode":
    c = env.config
    return MultiTurnEpisode(task, c.bfcl_checker_model, c.obs_max_chars, c.bfcl_max_steps_per_turn,
                            ReplyCaps.of(c))


class MultiTurnEpisode(ParsingEpisode):
    def __init__(self, task: Task, checker_model: str, obs_max_chars: int, max_steps_per_turn: int,
                 caps: ReplyCaps):
        super().__init__(task, obs_max_chars, caps)
        self.category = task.data["category"]
        self.entry = entries(self.category, False)[task.task_id]
        self.ground_truth = answers(self.category)[task.task_id]
        self.reference = reference_turns(self.category, task.task_id)
        self.specs, self.aliases = specs(self.category, task.task_id)
        self.model = f"nextstate_{next(_serial)}"  # checker_model only matters to the AST checker
        self.max_steps_per_turn = max_steps_per_turn
        self.turn = 0
        self.steps_in_turn = 0
        self.decoded: list[list[list[str]]] = [[]]  # per turn, per step: BFCL call strings
        self.force_quit = False

    def _count_step(self) -> bool:
        self.steps_in_turn += 1
        if self.steps_in_turn > self.max_steps_per_turn:
            self.force_quit = True
        return self.force_quit

    def on_calls(self, reply) -> Turn:
        # Names and argument names are checked here; argument *types* are left to bfcl-eval's API
        # classes, which are the referee in BFCL (its own ground truth for multi_turn_base_173 passes
        # a string where the doc says integer). A type mismatch still marks the step not well-formed.
        canon, problem = check_calls(reply.calls, self.specs, self.aliases, check_types=False)
        if problem:
            return error_turn(problem, done=self._count_step(), label=NOT_RUN)
        from bfcl_eval.model_handler.utils import convert_to_function_call

        strings = convert_to_function_call([{c.name: c.arguments} for c in canon])
        results, _ = _utils().execute_multi_turn_func_call(
            strings, self.entry["initial_config"], self.entry["involved_classes"], self.model, self.task.task_id,
            long_context="long_context" in self.category, is_evaL_run=False)
        self.decoded[self.turn].append(strings)
        # bfcl-eval runs the calls as one batch, in process (milliseconds): the result size is capped
        # here, after the fact; the time cap has nothing slow to stop
        blocks = [render_tool_responses([r], self.obs_max_chars) for r in results]
        text = "\n".join(blocks)
        errors = sum(_is_error(r) for r in results)
        if len(text.encode("utf-8")) > self.caps.max_obs_bytes:
            return capped_turn(blocks, len(blocks), self.caps.too_many_bytes(), self.caps,
                               {"calls": strings, "errors": errors, "turn": self.turn}, done=self._count_step())
        expected = {call_key(c) for c in self.reference[self.turn]}
        _, type_problem = check_calls(canon, self.specs)
        label = {"well_formed": type_problem is None, "executed_ok": errors == 0,
                 "matches_reference": all(call_key(c) in expected for c in canon)}
        ns = NextState(kind="tool", text=text, fields={"calls": strings, "errors": errors, "turn": self.turn,
                                                       **({"type_problem": type_problem} if type_problem else {})})
        return Turn(ns, text, done=self._count_step(), step_label=label)

    def on_text(self, text: str) -> Turn:
        self.turn += 1
        if self.turn >= len(self.ground_truth):
            return end_turn()
        self.decoded.append([])
        self.steps_in_turn = 0
        request = render_messages(self.entry["question"][self.turn])
        return Turn(NextState(kind="user", text=request, fields={"turn": self.turn}), request)

    def on_malformed(self, reason: str) -> Turn:
        return error_turn(reason, done=self._count_step(), label=NOT_RUN)

    def grade(self) -> tuple[float, dict]:
        turns_done = self.turn if self.turn >= len(self.ground_truth) else self.turn + 1
        if self.force_quit or self.turn < len(self.ground_truth):
            # BFCL's eval runner fails an entry whose inference was cut short, before any checker runs
            verdict: dict[str, Any] = {"valid": False, "error_type": "multi_turn:force_terminated",
                                       "error_message": f"{turns_done} of {len(self.ground_truth)} turns, "
                                                        f"force_quit={self.force_quit}"}
        else:
            from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

            grader = f"{self.model}_grade"
            try:
                verdict = multi_turn_checker(self.decoded, self.ground_truth, self.entry, self.category, grader)
            except Exception as e:  # malformed agent output can trip its asserts: a wrong answer
                verdict = {"valid": False, "error_type": "checker_exception", "error_message": f"{e!r}"}
            finally:
                self._forget(grader)
        valid = bool(verdict["valid"])
        report = "valid" if valid else f"{verdict.get('error_type')}: {verdict.get('error_message', '')}"[:2000]
        return float(valid), {"bfcl_error_type": verdict.get("error_type"), "test_output": report}

    def close(self) -> None:
        self._forget(self.model)

    @staticmethod
    def _forget(model: str) -> None:
        namespace = vars(_utils())
        prefix = model + "_"
        for key in list(namespace):  # list() copies atomically: other episodes may run in other threads
            if key.startswith(prefix):
                namespace.pop(key, None)
