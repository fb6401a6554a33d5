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
from typing import NamedTuple

from harness.types import NextState, Task

from .toolcall_bfcl import NO_CALL_EXPECTED
from .toolcall_bfcl import reference_actions, tools_for  # noqa: F401  (the env finds them here)
from .toolcall_bfcl_check import check_single, checked, entry_inputs
from .toolcall_episode import Turn
from .toolcall_parse import render_tool_responses, scan_calls
from .toolcall_validate import first_problem

RECORDED = "recorded; BFCL single-turn calls are graded, not executed"
NO_CALL_TEXT = "(answered without a tool call)"


class Judged(NamedTuple):
    """Everything a step and its grade show of one judged reply, flat (strings, bools, a tuple): the
    memo keeps this, not the checker's verdict dicts and next-state objects, so that remembering a
    new reply stays cheap; each step builds its own next state and labels from it."""
    kind: str  # of the next state: "tool", "user" (no call) or "error"
    text: str  # the next state's text
    obs: str
    calls: tuple[str, ...] | None  # the tool next state's fields["calls"]
    well_formed: bool
    valid: bool
    error_type: str | None
    report: str  # info["test_output"]


# Judgements by (category, entry, checker model, reply text): pure functions of these, and group
# rollouts (n samples per prompt) often repeat an answer word for word, so a repeat costs a dict
# lookup instead of a parse and a checker run. Bounded; the oldest go first.
_VERDICTS: dict[tuple[str, str, str, str], Judged] = {}
_MAX_VERDICTS = 50_000
_EVICT_LOCK = threading.Lock()


def _evict() -> None:
    with _EVICT_LOCK:
        while len(_VERDICTS) > _MAX_VERDICTS:
            try:
                del _VERDICTS[next(iter(_VERDICTS))]
            except (RuntimeError, KeyError):  # another thread changed the memo meanwhile: retry
                continue


def start_episode(task: Task, env) -> "SingleTurnEpisode":
    config = env.config
    return SingleTurnEpisode(task, config.bfcl_checker_model, config.obs_max_chars)


def _first_error(verdict: dict) -> str:
    """The checker's first message (its full error can hold every candidate it tried: costly to print)."""
    errors = verdict.get("error") or [""]
    first = errors[0] if isinstance(errors, list) else errors
    return (first if isinstance(first, str) else repr(first))[:1000]


def _judged(kind: str, text: str, obs: str, calls: tuple[str, ...] | None, well_formed: bool,
            verdict: dict) -> Judged:
    error_type = verdict.get("error_type")
    if verdict["valid"]:
        return Judged(kind, text, obs, calls, well_formed, True, error_type, "valid")
    return Judged(kind, text, obs, calls, well_formed, False, error_type, f"{error_type}: {_first_error(verdict)}")


def _next_state(j: Judged) -> NextState:
    return NextState(j.kind, j.text, fields={} if j.calls is None else {"calls": list(j.calls)})


class SingleTurnEpisode:
    """One reply, graded. A malformed call or a call the tools reject still ends the episode (BFCL
    grades the first answer); the agent reads the reason in the error next state. Reset and step
    sit on a hot path (a GRPO group grades thousands of replies), so the reply is scanned into
    (name, arguments) pairs and judged into a flat `Judged` without intermediate objects."""

    __slots__ = ("task", "category", "checker_model", "obs_max_chars", "judged")

    def __init__(self, task: Task, checker_model: str, obs_max_chars: int):
        self.task = task
        self.category = task.data["category"]
        self.checker_model = checker_model
        self.obs_max_chars = obs_max_chars
        self.judged: Judged | None = None

    def first_observation(self) -> str:
        return self.task.instruction

    def act(self, reply: str) -> Turn:
        j = self._lookup(reply)
        return Turn(_next_state(j), j.obs, True, {"well_formed": j.well_formed, "matches_reference": j.valid})

    def answer(self, reply: str) -> tuple[str, float, dict]:
        """The env's first step in one call: (observation, outcome, info), info as `act` then
        `grade` would give it (the env's fast path: no Turn, no second dict)."""
        j = self._lookup(reply)
        outcome = 1.0 if j.valid else 0.0
        return j.obs, outcome, {"next_state": _next_state(j),
                                "step_label": {"well_formed": j.well_formed, "matches_reference": j.valid},
                                "bfcl_error_type": j.error_type, "test_output": j.report,
                                "outcome": outcome, "success": j.valid}

    def _lookup(self, reply: str) -> Judged:
        if isinstance(reply, str):
            key = (self.category, self.task.task_id, self.checker_model, reply)
            j = _VERDICTS.get(key)
            if j is None:
                j = _VERDICTS[key] = self._judge(reply)  # one store: atomic, so parallel workers can share
                if len(_VERDICTS) > _MAX_VERDICTS:
                    _evict()
        else:  # nothing to key on; the scanner reports it
            j = self._judge(reply)
        self.judged = j
        return j

    def _judge(self, reply: str) -> Judged:
        calls, _, error = scan_calls(reply)
        category, entry_id, model = self.category, self.task.task_id, self.checker_model
        if error is not None or not calls:
            verdict = check_single(category, entry_id, None, model)
            if error is not None:
                return _judged("error", error, "[error] " + error, None, False, verdict)
            return _judged("user", NO_CALL_TEXT, NO_CALL_TEXT, None, True, verdict)
        entry = entry_inputs(category, entry_id, model)
        aliases = entry.aliases
        named = [(aliases.get(n, n), a) for n, a in calls] if aliases else calls
        verdict = (check_single(category, entry_id, named, model) if category in NO_CALL_EXPECTED
                   else checked(entry, named, category, model))
        # A call the checker accepts is well-formed (right names, required arguments, types), so the
        # schema check only runs to explain a rejected answer.
        problem = None if verdict["valid"] else first_problem(calls, entry.spec, aliases)
        if problem:
            return _judged("error", problem, "[error] " + problem, None, False, verdict)
        names = tuple([n for n, _ in named])
        text = render_tool_responses([f'{{"name": "{n}", "status": "{RECORDED}"}}' for n in names],
                                     self.obs_max_chars)
        return _judged("tool", text, text, names, True, verdict)

    def grade(self) -> tuple[float, dict]:
        j = self.judged
        if j is None:  # graded without an answer: as BFCL grades an undecodable one
            j = _judged("user", "", "", None, True, check_single(self.category, self.task.task_id, None,
                                                                   self.checker_model))
        return float(j.valid), {"bfcl_error_type": j.error_type, "test_output": j.report}

    def close(self) -> None:
        pass
