"""BFCL single-turn entries: the first reply is the answer, graded by bfcl-eval's `ast_checker`.

The reply's calls go to the checker unchanged (names mapped back from their OpenAI spelling). A
malformed reply, or calls the tools reject, still end the episode, as BFCL grades the first answer;
the agent reads the reason in the error next state. For `irrelevance` the right answer is no call, so
plain text (or a reply without a decodable call, as in BFCL's relevance runner) succeeds, and the
noop agent solves that category by design. The next state of a well-formed call says it was
recorded: single-turn functions have no backend to run on.
"""
from __future__ import annotations

import functools
import threading

from envs.toolcall.bfcl.check import EntryInputs, check_single, checked, entry_inputs
from envs.toolcall.bfcl.suite import NO_CALL_EXPECTED
from envs.toolcall.bfcl.suite import reference_actions as reference_actions  # re-exported (`x
from envs.toolcall.bfcl.suite import tools_for as tools_for  # finds both here
from envs.toolcall.episode import Turn
from envs.toolcall.parse import render_tool_responses, scan_calls
from envs.toolcall.validate import first_problem
from nextstate.types import NextState, Task

RECORDED = "recorded; BFCL single-turn calls are graded, not executed"
NO_CALL_TEXT = "(answered without a tool call)"


# One judged reply, as the memo keeps it and the step shows it:
#   (problem, names, valid, error_type, report)
# problem: why the reply could not be carried out (the text of its error next state), or None;
# names: the tools a well-formed reply called, () for no call; report: info["test_output"].
# A plain tuple of strings and bools, not a NamedTuple holding the next state: the memo keeps one
# per distinct reply for the run's life, and the garbage collector untracks plain tuples of atoms
# at their first collection. A NamedTuple (or a NextState) in the memo is traversed by every
# collection and, once promoted to the oldest generation, triggers full collections of the whole
# heap (7-12% of a steady grading loop's time: benchmarks/toolcall_grading.py, steady loop).
# The next state is built per step from it.
Judged = tuple[str | None, tuple[str, ...], bool, str | None, str]


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
    errors = verdict.get("error")
    first = (errors[0] if errors else "") if errors.__class__ is list else errors or ""
    return (first if first.__class__ is str else repr(first))[:1000]


def _judged(problem: str | None, names: tuple[str, ...], verdict: dict) -> Judged:
    if verdict["valid"]:
        return problem, names, True, verdict.get("error_type"), "valid"
    error_type = verdict.get("error_type")
    return problem, names, False, error_type, f"{error_type}: {_first_error(verdict)}"


@functools.lru_cache(maxsize=4096)
def _recorded(names: tuple[str, ...], max_chars: int) -> NextState:
    """The next state of well-formed calls depends on their names alone: a few lists per entry, so
    each is rendered (and its frozen next state built) once."""
    text = render_tool_responses([f'{{"name": "{n}", "status": "{RECORDED}"}}' for n in names], max_chars)
    return NextState("tool", text, fields={"calls": list(names)})


_NO_CALL = NextState("user", NO_CALL_TEXT)


class SingleTurnEpisode:
    """One reply, graded. A malformed call or a call the tools reject still ends the episode (BFCL
    grades the first answer); the agent reads the reason in the error next state. Reset and step
    sit on a hot path (a GRPO group grades thousands of replies), so the reply is scanned into
    (name, arguments) pairs and judged into a flat `Judged` without intermediate objects; the step
    builds its next state from that."""

    __slots__ = ("task", "category", "entry_id", "checker_model", "obs_max_chars", "judged", "entry")

    def __init__(self, task: Task, checker_model: str, obs_max_chars: int):
        self.task = task
        self.category = task.data["category"]
        self.entry_id = task.task_id
        self.checker_model = checker_model
        self.obs_max_chars = obs_max_chars
        self.judged: Judged | None = None
        self.entry: EntryInputs | None = None  # the checker's inputs, at the first answer

    def restart(self) -> None:
        """Ready for a new answer: the env keeps one episode per task, as a group answers it n times."""
        self.judged = None

    def first_observation(self) -> str:
        return self.task.instruction

    def act(self, reply: str) -> Turn:
        obs, _, _, _, info = self.answer(reply)
        return Turn(info["next_state"], obs, True, info["step_label"])

    def answer(self, reply: str) -> tuple[str, float, bool, bool, dict]:
        """The env's whole first step, `(obs, reward, terminated, truncated, info)`, info as `act` then
        `grade` would give it (the env's fast path: no Turn, no second dict)."""
        if isinstance(reply, str):
            key = (self.category, self.entry_id, self.checker_model, reply)
            j = _VERDICTS.get(key)
            if j is None:
                j = _VERDICTS[key] = self.judge(reply)  # one store: atomic, so parallel workers can share
                if len(_VERDICTS) > _MAX_VERDICTS:
                    _evict()
        else:  # nothing to key on; the scanner reports it
            j = self.judge(reply)
        self.judged = j
        problem, names, valid, error_type, report = j
        if problem is not None:
            obs, next_state = "[error] " + problem, NextState("error", problem)
        elif names:
            next_state = _recorded(names, self.obs_max_chars)
            obs = next_state.text
        else:
            obs, next_state = NO_CALL_TEXT, _NO_CALL
        outcome = 1.0 if valid else 0.0
        return obs, outcome, True, False, {
            "next_state": next_state, "step_label": {"well_formed": problem is None, "matches_reference": valid},
            "bfcl_error_type": error_type, "test_output": report, "outcome": outcome, "success": valid}

    def judge(self, reply: str) -> Judged:
        """The reply judged afresh (no memo): scan, bfcl-eval's checker, and the explanation of a
        rejected reply."""
        calls, _, error = scan_calls(reply)
        category, entry_id, model = self.category, self.entry_id, self.checker_model
        if error is not None or not calls:
            return _judged(error, (), check_single(category, entry_id, None, model))
        entry = self.entry or self._entry_inputs()
        aliases = entry.aliases
        named = [(aliases.get(n, n), a) for n, a in calls] if aliases else calls
        verdict = (check_single(category, entry_id, named, model) if category in NO_CALL_EXPECTED
                   else checked(entry, named, category, model))
        # A call the checker accepts is well-formed (right names, required arguments, types), so the
        # schema check only runs to explain a rejected answer.
        problem = None if verdict["valid"] else first_problem(calls, entry.spec, aliases)
        return _judged(problem or None, tuple([n for n, _ in named]), verdict)

    def _entry_inputs(self) -> EntryInputs:
        entry = self.entry = entry_inputs(self.category, self.entry_id, self.checker_model)
        return entry

    def grade(self) -> tuple[float, dict]:
        j = self.judged
        if j is None:  # graded without an answer: as BFCL grades an undecodable one
            j = _judged(None, (), check_single(self.category, self.entry_id, None, self.checker_model))
        _, _, valid, error_type, report = j
        return float(valid), {"bfcl_error_type": error_type, "test_output": report}

    def close(self) -> None:
        pass
