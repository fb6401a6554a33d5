"""What every tool-call suite implements for one episode; `envs/toolcall/env.py` drives it.

`act(reply)` takes the agent's reply; the usual way (`ParsingEpisode`) parses it (`toolcall_parse`)
and hands over one of three events: a reply with calls (the whole `ParsedReply`), plain text, or a
malformed reply. The episode answers with a `Turn`: the next state, the observation text the agent
reads, whether the episode is over, and the step's verifiable labels. `grade()` scores the episode
with the suite's own checker; `close()` frees what the episode holds (idempotent).
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


class InfraFailure(Exception):
    """The machinery behind a tool (Docker) failed: the episode ends unscored, never as a zero."""


class Episode(Protocol):
    task: Task

    def first_observation(self) -> str: ...

    def act(self, reply: str) -> Turn: ...

    def grade(self) -> tuple[float, dict[str, Any]]: ...

    def close(self) -> None: ...


class ParsingEpisode:
    """`act` = parse, then one of the three events the episode implements."""

    def act(self, reply: str) -> Turn:
        parsed = parse_reply(reply)
        if parsed.error:
            return self.on_malformed(parsed.error)
        if parsed.calls:
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
