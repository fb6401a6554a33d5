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
from dataclasses import dataclass

from envs.toolcall.bfcl.check import check_single
from envs.toolcall.bfcl.suite import reference_actions as reference_actions  # re-exported (`x
from envs.toolcall.bfcl.suite import specs
from envs.toolcall.bfcl.suite import tools_for as tools_for  # finds both here
from envs.toolcall.episode import ReplyCaps, TaskEpisode, Turn
from envs.toolcall.parse import parse_reply, render_tool_responses, scan_calls
from envs.toolcall.validate import check_calls
from nextstate.types import NextState, Task

RECORDED = "recorded; BFCL single-turn calls are graded, not executed"
NO_CALL_TEXT = "(answered without a tool call)"
TOO_MANY_CALLS = "nextstate:too_many_calls"  # the error type of a reply over the caps
MEMO_SIZE = 50_000  # judged replies kept; the least recently used go first


@dataclass(frozen=True)
class Judged:
    """One reply, judged: its next state and bfcl-eval's verdict."""

    next_state: NextState
    valid: bool
    error_type: str | None
    report: str  # info["test_output"]: "valid", or the error type and the checker's first message

    @property
    def well_formed(self) -> bool:
        return self.next_state.kind != "error"


def _first_error(verdict: dict) -> str:
    """The checker's first message (its full error can hold every candidate it tried: costly to print)."""
    errors = verdict.get("error")
    first = (errors[0] if errors else "") if isinstance(errors, list) else errors or ""
    return (first if isinstance(first, str) else repr(first))[:1000]


def _judged(next_state: NextState, verdict: dict) -> Judged:
    error_type = verdict.get("error_type")
    report = "valid" if verdict["valid"] else f"{error_type}: {_first_error(verdict)}"
    return Judged(next_state, verdict["valid"], error_type, report)


def judge(category: str, entry_id: str, model: str, obs_max_chars: int, reply: str) -> Judged:
    """The reply parsed, checked by bfcl-eval's checker, and its next state: the reason it could not be
    carried out, or the calls recorded."""
    parsed = parse_reply(reply)
    if parsed.error is not None or not parsed.calls:
        next_state = NextState("error", parsed.error) if parsed.error is not None else NextState("user", NO_CALL_TEXT)
        return _judged(next_state, check_single(category, entry_id, None, model))
    spec, aliases = specs(category, entry_id)
    named = [(aliases.get(c.name, c.name), c.arguments) for c in parsed.calls]
    verdict = check_single(category, entry_id, named, model)
    # A call the checker accepts is well-formed (right names, required arguments, types), so the
    # schema check only runs to explain a rejected answer.
    problem = None if verdict["valid"] else check_calls(parsed.calls, spec, aliases)[1]
    if problem:
        return _judged(NextState("error", problem), verdict)
    names = [name for name, _ in named]
    text = render_tool_responses([f'{{"name": "{n}", "status": "{RECORDED}"}}' for n in names], obs_max_chars)
    return _judged(NextState("tool", text, fields={"calls": names}), verdict)


# `judge` is a pure function of its arguments, and the samples of a group (n per prompt) often repeat
# a reply word for word: a repeat is looked up, not parsed and checked again.
judge_memo = functools.lru_cache(maxsize=MEMO_SIZE)(judge)


def start_episode(task: Task, env) -> "SingleTurnEpisode":
    config = env.config
    return SingleTurnEpisode(task, config.bfcl_checker_model, config.obs_max_chars, ReplyCaps.of(config))


class SingleTurnEpisode(TaskEpisode):
    """One reply, graded: the episode ends on it, whatever it is. A reply with more calls than the
    caps allow is refused unjudged (no BFCL answer has that many calls, so it would fail anyway)."""

    def __init__(self, task: Task, checker_model: str, obs_max_chars: int, caps: ReplyCaps):
        super().__init__(task, obs_max_chars, caps)
        self.category = task.data["category"]
        self.checker_model = checker_model
        self.judged: Judged | None = None

    def _judge(self, reply: str) -> Judged:
        # counting tags is cheap; only a reply that may be over the cap is parsed to be sure
        if isinstance(reply, str) and reply.count("<tool_call>") > self.caps.max_calls:
            too_many = self.caps.too_many_calls(len(scan_calls(reply)[0]))
            if too_many:
                return Judged(NextState("error", too_many), False, TOO_MANY_CALLS, f"{TOO_MANY_CALLS}: {too_many}")
        args = (self.category, self.task.task_id, self.checker_model, self.obs_max_chars, reply)
        return judge_memo(*args) if isinstance(reply, str) else judge(*args)  # a non-text reply is no key

    def act(self, reply: str) -> Turn:
        j = self.judged = self._judge(reply)
        ns = j.next_state
        obs = f"[error] {ns.text}" if ns.kind == "error" else ns.text
        return Turn(ns, obs, done=True, step_label={"well_formed": j.well_formed, "matches_reference": j.valid})

    def grade(self) -> tuple[float, dict]:
        j = self.judged or self._judge("")  # graded without an answer: as an empty reply
        return float(j.valid), {"bfcl_error_type": j.error_type, "test_output": j.report}

    def close(self) -> None:
        pass
