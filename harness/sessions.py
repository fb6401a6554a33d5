"""Live conversations as steps: the next message of a session is the next state of its last reply.

The proxy (harness/proxy.py) serves any OpenAI-style client. A client names its conversation with
`X-Session-Id` and each request's kind with `X-Turn-Type`: `main` turns are the agent's work and train;
`side` turns (a title, a summary, a memory write) are served but never recorded. When a session's
next main request arrives, the messages that came after the previous reply (the user's answer, or tool
results) are that reply's next state, and the reply becomes a `Step` to judge. `X-Session-Done` ends a
session: its last reply has no next state, so it is not trained on.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from .openai_wire import BadRequest
from .types import Generation, NextState, Step

TURN_TYPES = ("main", "side")


def turn_type_of(header: str | None) -> str:
    """The `X-Turn-Type` header's value: main (the default) or side."""
    turn_type = (header or "main").strip().lower()
    if turn_type not in TURN_TYPES:
        raise BadRequest(f"X-Turn-Type must be main or side, got {turn_type!r}")
    return turn_type


@dataclass
class PendingTurn:
    """A main reply waiting for its next state."""
    index: int
    messages: list[dict[str, str]]
    generation: Generation
    version: int


def next_state_of(messages: list[dict[str, str]]) -> NextState:
    """What came after the last assistant message: the user's reply ("user"), or tool results ("tool")."""
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    after = messages[last + 1:] or messages[-1:]
    kind = "tool" if all(m["role"] == "tool" for m in after) else "user"
    return NextState(kind=kind, text="\n".join(m["content"] for m in after))


class SessionBook:
    """Each session's last main reply, until its next state arrives. Thread-safe; the least recently
    used sessions are forgotten beyond `max_sessions` (their pending reply is dropped)."""

    def __init__(self, max_sessions: int = 1000):
        self.max_sessions = max_sessions
        self._pending: OrderedDict[str, PendingTurn | None] = OrderedDict()
        self._turns: dict[str, int] = {}
        self._lock = threading.Lock()
        self.unanswered = 0  # main replies that never got a next state (session done or forgotten)

    def record(self, session_id: str | None, turn_type: str, messages: list[dict[str, str]], generation: Generation,
               version: int, done: bool = False) -> list[tuple[int, Step]]:
        """Note a served request; return the steps it completes, with the policy version each reply
        was sampled with (at most one: the session's previous main reply)."""
        turn_type = turn_type_of(turn_type)
        if session_id is None or turn_type == "side":
            return []
        out = []
        with self._lock:
            prev = self._pending.pop(session_id, None)
            if prev is not None:
                g = prev.generation
                out.append((prev.version, Step(prev.index, prev.messages, g.text, next_state_of(messages),
                                               list(g.token_ids), list(g.logprobs), list(g.prompt_token_ids))))
            index = self._turns.get(session_id, 0)
            if done:
                self.unanswered += 1
                self._turns.pop(session_id, None)
                return out
            self._turns[session_id] = index + 1
            self._pending[session_id] = PendingTurn(index, messages, generation, version)
            while len(self._pending) > self.max_sessions:
                old, turn = self._pending.popitem(last=False)
                self._turns.pop(old, None)
                self.unanswered += turn is not None
        return out

    @property
    def open_sessions(self) -> int:
        with self._lock:
            return len(self._pending)
