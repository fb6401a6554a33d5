"""Live conversations as steps: the next message of a session is the next state of its last reply.

The proxy (trainers/proxy/server.py) serves any OpenAI-style client. When a conversation's next main
request arrives, the messages that came after the previous reply (the user's answer, or tool results)
are that reply's next state, and the reply becomes a `Step` to judge.

Which conversation a request continues:
- A stock client (OpenClaw, any OpenAI SDK) sends no header: the request is matched to the session
  whose waiting reply it carries in its history (found by content: the same text, or the same tool
  calls), and starts a new session otherwise. `X-Session-Id` names the session instead (`X-Turn-Type:
  side` marks a title or summary request that is served but never recorded; without the header, a
  side request whose reply nobody continues is never a step either).
- The waiting reply is found by its content, preceded by the messages of its prompt in order; a
  message the client inserted for one turn and left out of the next history (OpenClaw's per-turn
  context block) may be missing. A history without the reply (a client that rewrote it, or never got
  it: a timeout, a hang-up) is a new conversation: the waiting reply is dropped, never paired, and the
  session takes the request as its first turn.
- A session serves one main request at a time: another that comes meanwhile gets 409 (Retry-After).
- Each session has a token, sent back in every main reply's `X-Session-Token` header (and kept in the
  journal). `X-Session-Done` needs it (403 otherwise), and a request that sends a wrong one gets 403.
  `X-Session-Done` ends a session: its last reply has no next state, so it is not trained on.

With a journal (trainers/proxy/journal.py), a killed proxy resumes with every waiting reply and
untrained step.
"""
from __future__ import annotations

import hmac
import json
import queue
import secrets
import threading
from collections import OrderedDict

from envs.toolcall.parse import scan_calls
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


def reply_key(text: str) -> str:
    """What a reply is, however a client echoes it back: its text with whitespace collapsed, and its
    tool calls as (name, arguments) (a client re-encodes the arguments' JSON, and drops call ids)."""
    calls, rest, error = scan_calls(text or "")
    if error is not None:
        calls, rest = [], text or ""
    return json.dumps([" ".join(rest.split()), [[name, args] for name, args in calls]], sort_keys=True)


def _prompt_kept(head: list[dict[str, str]], prompt: list[dict[str, str]]) -> bool:
    """Whether `head` is the prompt's messages in order, less user messages the client dropped."""
    i = 0
    for m in prompt:
        if i < len(head) and head[i] == m:
            i += 1
        elif m["role"] != "user":
            return False
    return i == len(head)


def reply_at(turn: PendingTurn, messages: list[dict[str, str]]) -> int | None:
    """Where `messages` carries `turn`'s reply: the index of the assistant message with its content,
    after the turn's prompt (system messages aside: frameworks rewrite them) and before at least one
    more message. None: the history does not continue that reply."""
    want = reply_key(turn.shown or turn.generation.text)
    prompt = [m for m in turn.messages if m["role"] != "system"]
    for j in range(len(messages) - 2, -1, -1):
        m = messages[j]
        if m["role"] == "assistant" and reply_key(m["content"]) == want:
            if _prompt_kept([x for x in messages[:j] if x["role"] != "system"], prompt):
                return j
    return None


def next_state_of(messages: list[dict[str, str]], reply_index: int | None = None) -> NextState:
    """What came after the reply (at `reply_index`; by default the last assistant message): the user's
    reply ("user"), or tool results ("tool")."""
    last = reply_index if reply_index is not None else \
        max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
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
        self._by_reply: dict[str, str] = {}  # a waiting reply's `reply_key` -> its session
        self._lock = threading.Lock()
        self.unanswered = 0  # main replies that never got a next state (session done or forgotten)
        self.restored_pending = self.restored_steps = 0
        if journal is not None:
            self._restore(journal.replay(first_step))

    def _restore(self, replayed) -> None:
        for session, turn in replayed.pending.items():
            self._pending[session] = turn
            self._by_reply[reply_key(turn.shown or turn.generation.text)] = session
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
              token: str | None = None) -> tuple[str | None, str | None]:
        """Before a request is served: (its session, that session's token), the session marked busy
        until `release`; (None, None) for side turns. A request with no session id gets the session
        whose waiting reply its history carries, or a new one. `SessionRefused`: 409 (another request
        of the session is being served), 403 (a wrong token, or X-Session-Done without it)."""
        if turn_type_of(turn_type) == "side":
            return None, None
        with self._lock:
            if session_id is None:
                session_id = self._continued(messages) or f"auto-{secrets.token_hex(8)}"
            elif session_id.startswith("auto-") and session_id not in self._pending:
                raise SessionRefused(403, "session ids starting with auto- are the proxy's own")
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
            self._busy.add(session_id)
        return session_id, session_token

    def _continued(self, messages: list[dict[str, str]]) -> str | None:
        """The waiting session whose reply `messages` carries (the latest such reply wins)."""
        for m in reversed(messages[:-1]):
            if m["role"] == "assistant":
                session = self._by_reply.get(reply_key(m["content"]))
                turn = self._pending.get(session) if session else None
                if turn is not None and reply_at(turn, messages) is not None:
                    return session
        return None

    def release(self, session_id: str | None) -> None:
        with self._lock:
            self._busy.discard(session_id)

    def record(self, session_id: str | None, turn_type: str, messages: list[dict[str, str]], generation: Generation,
               version: int, done: bool = False, tools: list[dict] | None = None,
               token: str = "", shown: str = "") -> list[tuple[int, Step]]:
        """Note a served request (`shown`: its reply as the client got it, before a stop string);
        return the steps it completes, with the policy version each reply was sampled with (at most
        one: the session's previous main reply), and queue them. A history that does not carry the
        waiting reply drops it, unpaired (see the module's docstring)."""
        turn_type = turn_type_of(turn_type)
        if session_id is None or turn_type == "side":
            return []
        out = []
        with self._lock:  # each change is journaled first, then made: a write the disk refuses
            prev = self._pending.get(session_id)  # (OSError, to the caller) changes nothing after it
            at = reply_at(prev, messages) if prev is not None else None
            if prev is not None and at is None:  # a new conversation: the waiting reply has no next state
                if self.journal is not None:
                    self.journal.end(session_id)
                self._forget(session_id)
                self.unanswered += 1
                self._turns.pop(session_id, None)
            elif prev is not None:
                token = prev.token
                g = prev.generation
                step = Step(prev.index, prev.messages, g.text, next_state_of(messages, at), list(g.token_ids),
                            list(g.logprobs), list(g.prompt_token_ids))
                done_step = JournaledStep(self.next_no, session_id, prev.version, step, prev.tools)
                if self.journal is not None:
                    self.journal.step(done_step)
                self._forget(session_id)
                self.next_no += 1
                self.steps.put(done_step)
                out.append((prev.version, step))
            index = self._turns.get(session_id, 0)
            if done:
                self.unanswered += 1
                self._turns.pop(session_id, None)
                return out
            turn = PendingTurn(index, messages, generation, version, tools, token, shown)
            if self.journal is not None:
                self.journal.pending(session_id, turn)
            if tools:
                self.tools[session_id] = tools
            self._turns[session_id] = index + 1
            self._pending[session_id] = turn
            self._by_reply[reply_key(shown or generation.text)] = session_id
            while len(self._pending) > self.max_sessions:
                old = next(iter(self._pending))
                if self.journal is not None:
                    self.journal.end(old)
                self._forget(old)
                self._turns.pop(old, None)
                self.unanswered += 1
        return out

    def _forget(self, session_id: str) -> PendingTurn | None:
        """Take the session's waiting reply out of the book (and out of the reply index)."""
        turn = self._pending.pop(session_id, None)
        if turn is not None:
            key = reply_key(turn.shown or turn.generation.text)
            if self._by_reply.get(key) == session_id:
                del self._by_reply[key]
        return turn

    def compact(self, keep_from: int) -> None:
        """Rewrite the journal with what is still open: the waiting replies, the steps from `keep_from`."""
        if self.journal is not None:
            with self._lock:
                self.journal.compact(dict(self._pending), keep_from)

    @property
    def open_sessions(self) -> int:
        with self._lock:
            return len(self._pending)
