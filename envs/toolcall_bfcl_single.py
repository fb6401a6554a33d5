"""BFCL single-turn entries: the first reply is the answer, graded by bfcl-eval's `ast_checker`.

The reply's calls go to the checker unchanged (names mapped back from their OpenAI spelling). A
malformed reply, or calls the tools reject, still end the episode, as BFCL grades the first answer;
the agent reads the reason in the error next state. For `irrelevance` the right answer is no call, so
plain text (or a reply without a decodable call, as in BFCL's relevance runner) succeeds, and the
noop agent solves that category by design. The next state of a well-formed call says it was
recorded: single-turn functions have no backend to run on.
"""
from __future__ import annotations

import threading

from harness.types import NextState, Task

from .toolcall_bfcl import NO_CALL_EXPECTED, answers, ast_checker, entries, specs
from .toolcall_bfcl import reference_actions, tools_for  # noqa: F401  (the env finds them here)
from .toolcall_episode import ParsingEpisode, Turn, error_turn
from .toolcall_parse import ToolCall, render_tool_responses
from .toolcall_validate import check_calls

RECORDED = "recorded; BFCL single-turn calls are graded, not executed"

# Verdicts and next states by (category, entry, checker model, reply text): both are pure functions
# of these, and group rollouts (n samples per prompt) often repeat an answer word for word, so a
# repeat costs a dict lookup instead of a parse and a checker run. Bounded; the oldest go first.
_VERDICTS: dict[tuple[str, str, str, str], tuple[dict, Turn]] = {}
_MAX_VERDICTS = 50_000
_VERDICTS_LOCK = threading.Lock()


def check_single(category: str, entry_id: str, calls: list[ToolCall] | None, model: str) -> dict:
    """bfcl-eval's verdict on one single-turn answer; `calls=None` means no decodable call."""
    if category in NO_CALL_EXPECTED:  # BFCL's relevance runner: success iff no call was decoded
        return {"valid": not calls, **({} if not calls else {
            "error": ["Valid syntax. Successfully decode AST when it should not."],
            "error_type": "irrelevance_error:decoder_success"})}
    if not calls:
        return {"valid": False, "error": ["no function call decoded"], "error_type": "ast_decoder:decoder_failed"}
    checker, python = ast_checker()
    output = [{c.name: c.arguments} for c in calls]
    try:
        return checker(entries(category, False)[entry_id]["function"], output, answers(category)[entry_id],
                       python, category, model)
    except Exception as e:  # the checker chokes on some shapes of wrong output: that is a wrong answer
        return {"valid": False, "error": [f"checker raised {type(e).__name__}: {e}"],
                "error_type": "checker_exception"}


def start_episode(task: Task, env) -> "SingleTurnEpisode":
    return SingleTurnEpisode(task, env.config.bfcl_checker_model, env.config.obs_max_chars)


def _first_error(verdict: dict) -> str:
    """The checker's first message (its full error can hold every candidate it tried: costly to print)."""
    errors = verdict.get("error") or [""]
    first = errors[0] if isinstance(errors, list) else errors
    return (first if isinstance(first, str) else repr(first))[:1000]


class SingleTurnEpisode(ParsingEpisode):
    """One reply, graded. A malformed call or a call the tools reject still ends the episode (BFCL
    grades the first answer); the agent reads the reason in the error next state."""

    def __init__(self, task: Task, checker_model: str, obs_max_chars: int):
        self.task = task
        self.category = task.data["category"]
        self.checker_model = checker_model
        self.obs_max_chars = obs_max_chars
        self.verdict: dict | None = None

    def first_observation(self) -> str:
        return self.task.instruction

    def _label(self, well_formed: bool) -> dict[str, bool]:
        return {"well_formed": well_formed, "matches_reference": bool(self.verdict["valid"])}

    def act(self, reply: str) -> Turn:
        if not isinstance(reply, str):  # nothing to key on; the parser reports it
            return super().act(reply)
        key = (self.category, self.task.task_id, self.checker_model, reply)
        hit = _VERDICTS.get(key)
        if hit is None:
            turn = super().act(reply)  # parses, judges, sets self.verdict
            hit = (self.verdict, turn)
            with _VERDICTS_LOCK:  # envs of parallel workers share the memo
                _VERDICTS[key] = hit
                if len(_VERDICTS) > _MAX_VERDICTS:
                    del _VERDICTS[next(iter(_VERDICTS))]
        self.verdict, turn = hit
        return Turn(turn.next_state, turn.obs, turn.done, dict(turn.step_label))  # labels stay per step

    def on_calls(self, reply) -> Turn:
        self.verdict, turn = self._judge(reply.calls)
        return turn

    def _judge(self, calls) -> tuple[dict, Turn]:
        spec, aliases = specs(self.category, self.task.task_id)
        named = [ToolCall(aliases.get(c.name, c.name), c.arguments) for c in calls] if aliases else list(calls)
        verdict = check_single(self.category, self.task.task_id, named, self.checker_model)
        # A call the checker accepts is well-formed (right names, required arguments, types), so the
        # schema check only runs to explain a rejected answer.
        problem = None if verdict["valid"] else check_calls(calls, spec, aliases)[1]
        label = {"well_formed": problem is None, "matches_reference": bool(verdict["valid"])}
        if problem:
            return verdict, error_turn(problem, done=True, label=label)
        text = render_tool_responses([f'{{"name": "{c.name}", "status": "{RECORDED}"}}' for c in named],
                                     self.obs_max_chars)
        ns = NextState(kind="tool", text=text, fields={"calls": [c.name for c in named]})
        return verdict, Turn(ns, text, done=True, step_label=label)

    def on_text(self, text: str) -> Turn:
        self.verdict = check_single(self.category, self.task.task_id, None, self.checker_model)
        ns = NextState(kind="user", text="(answered without a tool call)")
        return Turn(ns, ns.text, done=True, step_label=self._label(True))

    def on_malformed(self, reason: str) -> Turn:
        self.verdict = check_single(self.category, self.task.task_id, None, self.checker_model)
        return error_turn(reason, done=True, label=self._label(False))

    def grade(self) -> tuple[float, dict]:
        verdict = self.verdict or check_single(self.category, self.task.task_id, None, self.checker_model)
        valid = bool(verdict["valid"])
        report = "valid" if valid else f"{verdict.get('error_type')}: {_first_error(verdict)}"
        return float(valid), {"bfcl_error_type": verdict.get("error_type"), "test_output": report}

    def close(self) -> None:
        pass
