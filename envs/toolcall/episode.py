"""What every tool-call suite implements for one episode; `envs/toolcall/env.py` drives it.

`act(reply)` takes the agent's reply; the usual way (`ParsingEpisode`) parses it (`toolcall_parse`)
and hands over one of three events: a reply with calls (the whole `ParsedReply`), plain text, or a
malformed reply. The episode answers with a `Turn`: the next state, the observation text the agent
reads, whether the episode is over, and the step's verifiable labels. `grade()` scores the episode
with the suite's own checker; `close()` frees what the episode holds (idempotent).

One reply may cost only so much (`ReplyCaps`, from conf/env/toolcall.yaml): a reply with more calls
than `max_calls_per_reply` is refused whole (nothing runs); the calls of a reply stop running once
their results pass `max_reply_obs_bytes` or their tools have taken `max_reply_tool_s` (a slow tool's
call gets what is left of that time as its timeout, when that is less than its own: the reply's
tool time ends within a second of the cap). Either is the agent's doing: an error next state that
says which calls ran, with their results up to the cap, and the episode goes on.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

from envs.toolcall.parse import ParsedReply, ToolCall, parse_reply
from nextstate.types import NextState, Task

NO_TOOL_CALL_TEXT = "(no tool call: the conversation is over)"


@dataclass(frozen=True)
class Turn:
    next_state: NextState
    obs: str
    done: bool = False
    step_label: dict[str, bool] | None = None


@dataclass(frozen=True)
class ReplyCaps:
    """What one reply may cost: how many calls, how many bytes of tool results, how many seconds of
    tool time (see the module docstring)."""

    max_calls: int
    max_obs_bytes: int
    max_tool_s: float

    @classmethod
    def of(cls, config) -> "ReplyCaps":
        return cls(config.max_calls_per_reply, config.max_reply_obs_bytes, config.max_reply_tool_s)

    def too_many_bytes(self) -> str:
        return f"the reply's tool results came to more than {self.max_obs_bytes} bytes, the limit per reply"

    def too_many_calls(self, n: int) -> str | None:
        if n <= self.max_calls:
            return None
        return (f"the reply makes {n} tool calls; at most {self.max_calls} per reply: nothing was run. "
                "Make fewer calls per reply")


def capped_results(blocks: list[str], n_calls: int, reason: str, max_bytes: int) -> str:
    """The error text of a reply stopped by a cap: what ran and what did not, then the results of
    the calls that ran, cut to `max_bytes` (UTF-8)."""
    ran = len(blocks)
    head = (f"{reason}: {ran} of {n_calls} tool calls ran"
            + (f", calls {ran + 1} to {n_calls} were not run" if ran < n_calls else "") + ".")
    body = "\n".join(blocks).encode("utf-8")
    if len(body) > max_bytes:
        cut = len(body) - max_bytes
        body_text = body[:max_bytes].decode("utf-8", "ignore") + f"\n[... {cut} bytes of tool results cut ...]"
    else:
        body_text = body.decode("utf-8")
    return f"{head}\n{body_text}" if body_text else head


NOT_RUN = {"well_formed": False, "executed_ok": False, "matches_reference": False}
"""The step label of a reply whose calls never ran (malformed, unknown tool, bad arguments)."""


def capped_turn(blocks: list[str], n_calls: int, reason: str, caps: ReplyCaps, fields: dict, *,
                done: bool = False) -> Turn:
    """The turn of a reply a cap stopped: an error next state with what ran; well-formed, not executed."""
    text = capped_results(blocks, n_calls, reason, caps.max_obs_bytes)
    return Turn(NextState(kind="error", text=text, fields=fields), f"[error] {text}", done=done,
                step_label={**NOT_RUN, "well_formed": True})


class InfraFailure(Exception):
    """The machinery behind a tool (Docker) failed: the episode ends unscored, never as a zero."""


class Episode(Protocol):
    task: Task

    def first_observation(self) -> str: ...

    def act(self, reply: str) -> Turn: ...

    def grade(self) -> tuple[float, dict[str, Any]]: ...

    def close(self) -> None: ...


class TaskEpisode:
    """An episode's task, its limits, and its first observation (the task's instruction)."""

    def __init__(self, task: Task, obs_max_chars: int, caps: ReplyCaps):
        self.task, self.obs_max_chars, self.caps = task, obs_max_chars, caps

    def first_observation(self) -> str:
        return self.task.instruction


class ParsingEpisode(TaskEpisode):
    """`act` = parse, then one of the three events the episode implements (a reply with more calls
    than `caps` allows is malformed)."""

    def act(self, reply: str) -> Turn:
        parsed = parse_reply(reply)
        if parsed.error:
            return self.on_malformed(parsed.error)
        if parsed.calls:
            too_many = self.caps.too_many_calls(len(parsed.calls))
            if too_many:
                return self.on_malformed(too_many)
            return self.on_calls(parsed)
        return self.on_text(parsed.text)

    def on_calls(self, reply: ParsedReply) -> Turn:
        raise NotImplementedError

    def on_text(self, text: str) -> Turn:
        raise NotImplementedError

    def on_malformed(self, reason: str) -> Turn:
        raise NotImplementedError


def error_turn(reason: str, *, done: bool = False, label: dict[str, bool] | None = None) -> Turn:
    ns = NextState(kind="error", text=reason)
    return Turn(ns, f"[error] {reason}", done=done, step_label=label)


def end_turn() -> Turn:
    return Turn(NextState(kind="user", text=NO_TOOL_CALL_TEXT), NO_TOOL_CALL_TEXT, done=True)


def canonical_args(value: Any) -> str:
    """A key for comparing arguments: key order and int/float spelling (3 vs 3.0) do not matter."""
    def norm(v):
        if isinstance(v, bool) or v is None or isinstance(v, str):
            return v
        if isinstance(v, (int, float)):
            return float(v)
        if isinstance(v, (list, tuple)):
            return [norm(x) for x in v]
        if isinstance(v, dict):
            return {str(k): norm(x) for k, x in v.items()}
        return repr(v)
    return json.dumps(norm(value), sort_keys=True, ensure_ascii=False)


def call_key(call: ToolCall) -> tuple[str, str]:
    return call.name, canonical_args(call.arguments)
