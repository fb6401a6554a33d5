"""Live conversations as steps: the next message of a session is the next state of its last reply.

The proxy (trainers/proxy/server.py) serves any OpenAI-style client. A client names its conversation with
`X-Session-Id` and each request's kind with `X-Turn-Type`: `main` turns are the agent's work and train;
`side` turns (a title, a summary, a memory write) are served but never recorded. When a session's
next main request arrives, the messages that came after the previous reply (the user's answer, or tool
results) are that reply's next state, and the reply becomes a `Step` to judge. `X-Session-Done` ends a
session: its last reply has no next state, so it is not trained on. With a journal
(trainers/proxy/journal.py), a killed proxy resumes with every waiting reply and untrained step.

One conversation per session (`admit`, before a main request is served):
- A session serves one main request at a time: another that comes meanwhile gets 409 (Retry-After).
- A request must continue the waiting reply's conversation (`continues`): the messages of the reply's
  prompt (system messages aside: frameworks rewrite them), then an assistant message (the reply), then
  what came after. Any other history gets 409 and is never paired with the reply as a step; a new
  conversation takes a new X-Session-Id (or the session is ended first).
- Each session has a token, sent back in every main reply's `X-Session-Token` header (and kept in the
  journal). `X-Session-Done` needs it (403 otherwise), and a request that sends a wrong one gets 403:
  a client that knows only a session's id cannot end it. (Sending the token on every request is
  optional, so that clients that only echo X-Session-Id keep working.)
"""
from __future__ import annotations

import hmac
import queue
import secrets
import threading
from collections import OrderedDict

from nextstate.types import Generation, NextState, Step
from trainers.proxy.journal import JournaledStep, PendingTurn, SessionJournal
from trainers.proxy.openai_wire import BadRequest

TURN_TYPES = ("main", "side")


def turn_type_of(header: str | None) -> str:
    """The `X-Turn-Type` header's value: main (the default) or side."""
    turn_type = (header or "main").strip().lower()
    if turn_type not in TURN_TYPES:
        raise BadRequest(f"X-Turn-Type must be main or side, got {turn_type!r}")
    return turn_type


class SessionRefused(Exception):
    """A request its session cannot take now (answered with `status` and this message)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def continues(prompt: list[dict[str, str]], messages: list[dict[str, str]]) -> bool:
    """Whether `messages` carries on the conversation whose reply was sampled for `prompt`: the prompt's
    messages (system ones aside), then an assistant message (the reply), then at least one more."""
    before = [m for m in prompt if m["role"] != "system"]
    now = [m for m in messages if m["role"] != "system"]
    return now[:len(before)] == before and len(now) > len(before) + 1 and now[len(before)]["role"] == "assistant"


def next_state_of(messages: list[dict[str, str]]) -> NextState:
    """What came after the last assistant message: the user's reply ("user"), or tool results ("tool")."""
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    after = messages[last + 1:] or messages[-1:]
    kind = "tool" if all(m["role"] == "tool" for m in after) else "user"
    return NextState(kind=kind, text="\n".join(m["content"] for m in after))


class SessionBook:
    """Each session's last main reply, until its next state arrives; the steps that completes, numbered
    and queued (`steps`) for the judge. Thread-safe; the least recently used sessions are forgotten
    beyond `max_sessions` (their pending reply is dropped). With a journal, every change is on disk
    first, and a new book reads back what the journal holds from step `first_step` on."""

    def __init__(self, max_sessions: int = 1000, journal: SessionJournal | None = None, *, first_step: int = 0,
                 tools: dict | None = None):
        self.max_sessions = max_sessions
        self.journal = journal
        self.tools = tools if tools is not None else {}  # session -> its tools (the teacher's prompt needs them)
        self.steps: queue.Queue[JournaledStep] = queue.Queue()
        self.next_no = first_step
        self._pending: OrderedDict[str, PendingTurn] = OrderedDict()
        self._turns: dict[str, int] = {}
        self._busy: set[str] = set()  # sessions with a main request being served
        self._lock = threading.Lock()
        self.unanswered = 0  # main replies that never got a next state (session done or forgotten)
        self.restored_pending = self.restored_steps = 0
        if journal is not None:
            self._restore(journal.replay(first_step))

    def _restore(self, replayed) -> None:
        for session, turn in replayed.pending.items():
            self._pending[session] = turn
            self._turns[session] = turn.index + 1
            if turn.tools:
                self.tools[session] = turn.tools
        for s in replayed.steps:
            self.steps.put(s)
            self.next_no = max(self.next_no, s.no + 1)
            if s.tools:
                self.tools.setdefault(s.session, s.tools)
        self.restored_pending, self.restored_steps = len(replayed.pending), len(replayed.steps)

    def admit(self, session_id: str | None, turn_type: str, messages: list[dict[str, str]], done: bool = False,
              token: str | None = None) -> str | None:
        """Before a request is served: its session's token (None for side turns and anonymous requests),
        with the session marked busy until `release`; or `SessionRefused` (409: another request of the
        session is being served, or the history does not continue the waiting reply's; 403: a wrong
        token, or X-Session-Done without it)."""
        if session_id is None or turn_type_of(turn_type) == "side":
            return None
        with self._lock:
            if session_id in self._busy:
                raise SessionRefused(409, f"session {session_id!r} is serving another request; a session takes "
                                          "one main request at a time")
            prev = self._pending.get(session_id)
            if prev is None:
                session_token = secrets.token_urlsafe(18)
            else:
                session_token = prev.token
                if token and not hmac.compare_digest(token.encode(), session_token.encode()):
                    raise SessionRefused(403, f"X-Session-Token is not session {session_id!r}'s")
                if done and session_token and not token:
                    raise SessionRefused(403, "X-Session-Done needs the session's X-Session-Token (sent back with "
                                              "each of its replies)")
                if not continues(prev.messages, messages):
                    raise SessionRefused(409, f"the messages do not continue session {session_id!r}'s conversation "
                                              "(its last reply and what came after); use a new X-Session-Id")
            self._busy.add(session_id)
        return session_token

    def release(self, session_id: str | None) -> None:
        with self._lock:
            self._busy.discard(session_id)

    def record(self, session_id: str | None, turn_type: str, messages: list[dict[str, str]], generation: Generation,
               version: int, done: bool = False, tools: list[dict] | None = None,
               token: str = "") -> list[tuple[int, Step]]:
        """Note a served request; return the steps it completes, with the policy version each reply
        was sampled with (at most one: the session's previous main reply), and queue them. A history
        that does not continue the waiting reply's is `SessionRefused` (`admit` refuses it before serving)."""
        turn_type = turn_type_of(turn_type)
        if session_id is None or turn_type == "side":
            return []
        out = []
        with self._lock:
            waiting = self._pending.get(session_id)
            if waiting is not None and not continues(waiting.messages, messages):
                raise SessionRefused(409, f"the messages do not continue session {session_id!r}'s conversation")
            prev = self._pending.pop(session_id, None)
            if prev is not None:
                token = prev.token
                g = prev.generation
                step = Step(prev.index, prev.messages, g.text, next_state_of(messages), list(g.token_ids),
                            list(g.logprobs), list(g.prompt_token_ids))
                done_step = JournaledStep(self.next_no, session_id, prev.version, step, prev.tools)
                self.next_no += 1
                if self.journal is not None:
                    self.journal.step(done_step)
                self.steps.put(done_step)
                out.append((prev.version, step))
            index = self._turns.get(session_id, 0)
            if done:
                self.unanswered += 1
                self._turns.pop(session_id, None)
                return out
            if tools:
                self.tools[session_id] = tools
            self._turns[session_id] = index + 1
            turn = self._pending[session_id] = PendingTurn(index, messages, generation, version, tools, token)
            if self.journal is not None:
                self.journal.pending(session_id, turn)
            while len(self._pending) > self.max_sessions:
                old, _ = self._pending.popitem(last=False)
                self._turns.pop(old, None)
                self.unanswered += 1
                if self.journal is not None:
                    self.journal.end(old)
        return out

    def compact(self, keep_from: int) -> None:
        """Rewrite the journal with what is still open: the waiting replies, the steps from `keep_from`."""
        if self.journal is not None:
            with self._lock:
                self.journal.compact(dict(self._pending), keep_from)

    @property
    def open_sessions(self) -> int:
        with self._lock:
            return len(self._pending)
