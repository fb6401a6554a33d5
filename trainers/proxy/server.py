"""`mode=proxy`: train any agent simply by talking. An OpenAI-compatible endpoint in front of the
policy; every live conversation through it becomes training data while it is being served.

  client --POST /v1/chat/completions (headers optional: X-Session-Id, X-Turn-Type, X-Session-Done)--> proxy
  the conversation's next main request = the next state of its previous reply (trainers/proxy/sessions.py:
  matched by the reply in its history, one main request at a time, X-Session-Done with the token)
  -> judge thread: votes / hints / teacher logprobs -> samples        (the async loops of mode=async)
  -> trainer: `batch_samples` fresh samples -> PPO update -> weights swapped into the server
     (requests meanwhile get HTTP 503 with Retry-After, as in the paper) -> log line + checkpoint

Every request is checked before it is sampled (trainers/proxy/request.py): a 400 naming the field.
Tool calls and streaming speak OpenAI's wire format (trainers/proxy/openai_wire.py), so agent frameworks
that run tools work unchanged. There is no env, no task and no outcome: use a per-step signal with
`signal.baseline=none` (`+experiment=personal_proxy`). `mode.iterations` updates, then the proxy
stops (0 = until Ctrl-C). The URL is printed and written to `<run_dir>/proxy.json` (with
`mode.port=0`, a free port is taken). Waiting replies and untrained steps are journaled
(trainers/proxy/journal.py), so a killed proxy resumes without losing a conversation.
"""
from __future__ import annotations

import dataclasses
import functools
import queue
import threading
from dataclasses import dataclass
from typing import Callable, Iterator

from agents.serving.asgi_guard import Limits
from agents.serving.chat import render_prompt_ids
from agents.serving.transformers_policy import SamplingConfig
from nextstate.types import Trajectory
from trainers.async_train import AsyncTrainConfig
from trainers.gate import Gate, Stopped
from trainers.proxy.http import openai_error
from trainers.proxy.openai_wire import (
    BadRequest,
    EventStream,
    completion,
    plain_messages,
    refuse_what_cannot_be_honoured,
    shown_so_far,
    until_stop,
)
from trainers.proxy.request import parse_request
from trainers.proxy.sessions import SessionBook, SessionRefused, turn_type_of


@dataclass
class ProxyConfig(AsyncTrainConfig):
    host: str
    port: int  # 0 = a free port (see <run_dir>/proxy.json)
    max_sessions: int  # sessions kept waiting for their next message; the least recent go first
    api_key: str  # non-empty: requests must carry `Authorization: Bearer <api_key>`
    max_tokens_cap: int | None  # a request's max_tokens above it is clamped to it (None: model.max_new_tokens)
    max_body_bytes: int  # a bigger request body is refused (413) before it is read
    max_in_flight: int  # requests served at once (streams included); more get 503 + Retry-After
    body_timeout_s: float  # a body must arrive within this (408)
    idle_timeout_s: float  # a connection's next request head must arrive within this, or it is closed

    def limits(self) -> Limits:
        return Limits(max_body_bytes=self.max_body_bytes, max_in_flight=self.max_in_flight,
                      body_timeout_s=self.body_timeout_s, idle_timeout_s=self.idle_timeout_s)


@dataclass
class _Request:
    """One chat-completions request, read and checked."""
    session: str | None
    turn_type: str
    done: bool  # X-Session-Done
    token: str | None  # X-Session-Token
    messages: list[dict[str, str]]
    tools: list[dict] | None
    sampling: SamplingConfig
    seed: int | None
    stream: bool
    parse_tools: bool  # tools offered (and tool_choice is not "none"): calls go out as tool_calls
    include_usage: bool  # stream_options.include_usage


class _Releasing:
    """A reply's event stream that frees its session once closed, even if never started (a client gone
    before the first event): a generator's own `finally` would not run then."""

    def __init__(self, events: Iterator[bytes], release):
        self.events, self._release = events, release

    def __iter__(self):
        return self

    def __next__(self) -> bytes:
        return next(self.events)

    def close(self) -> None:
        try:
            self.events.close()
        finally:
            self._release()


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes")


class Proxy:
    """The endpoint's logic, apart from HTTP: serve a request, record what it completes."""

    def __init__(self, policy, gate: Gate, book: SessionBook, sampling: SamplingConfig, model_name: str,
                 api_key: str = "", *, max_tokens_cap: int | None = None, special_tokens: tuple[str, ...] = (),
                 prompt_tokens: Callable[[list[dict], list[dict] | None], int] | None = None):
        """`max_tokens_cap` None: the default sampling's max_new_tokens; `special_tokens`: the chat
        template's, refused in messages and tools (trainers/proxy/request.py); `prompt_tokens(messages,
        tools)`: a request's prompt length in tokens, refused past `sampling.max_prompt_tokens`
        (None: the policy's tokenizer and chat template)."""
        self.policy, self.gate, self.book, self.sampling, self.model_name = policy, gate, book, sampling, model_name
        self.api_key = api_key
        self.max_tokens_cap = max_tokens_cap
        self.special_tokens = special_tokens
        self.prompt_tokens = prompt_tokens or (lambda m, t: len(render_prompt_ids(policy.tokenizer, m, t)))
        self.served = 0
        self.recorded = 0
        self._lock = threading.Lock()

    def chat(self, body, headers) -> tuple[int, dict | Iterator[bytes], dict]:
        """(HTTP status, JSON body or server-sent events, extra headers) for one chat-completions request."""
        if not self.gate.is_open:
            return 503, openai_error("the policy's weights are being updated; retry in a moment", "unavailable"), \
                {"Retry-After": "1"}
        try:
            req = self._request(body, headers)
        except BadRequest as e:
            return 400, openai_error(str(e)), {}
        if (too_long := self._too_long(req)) is not None:
            return 400, too_long, {}
        try:  # the session is busy (one main request at a time) until its reply is recorded
            session, token = self.book.admit(req.session, req.turn_type, req.messages, req.done, req.token)
            req = dataclasses.replace(req, session=session)
        except SessionRefused as e:
            return e.status, openai_error(str(e), "conflict" if e.status == 409 else "permission_error"), \
                {"Retry-After": "1"} if e.status == 409 else {}
        out = {"X-Session-Token": token} if token else {}
        release = functools.partial(self.book.release, req.session) if token else lambda: None
        version = self.gate.version  # the version this reply is sampled from (the server swaps only while closed)
        if req.stream:
            return 200, _Releasing(self._streamed(req, version, token), release), \
                {"Content-Type": "text/event-stream", "Cache-Control": "no-cache", **out}
        try:
            gen = self.policy.generate([req.messages], tools=req.tools, sampling=req.sampling,
                                       seeds=None if req.seed is None else [req.seed], session=req.session)[0]
            self._record(req, gen, version, token)
        except OSError as e:  # the journal's disk: the reply is not served, so nothing is lost
            return 507, openai_error(f"the proxy cannot record this conversation ({e}); free space in its run "
                                     "dir and send the request again", "insufficient_storage"), {}
        finally:
            release()
        return 200, completion(gen, self.model_name, parse_tool_calls=req.parse_tools, stop=req.sampling.stop), out

    def _too_long(self, req: _Request) -> dict | None:
        """OpenAI's `context_length_exceeded` for a prompt over the budget (clients such as OpenClaw
        read it and compact their history); never a prompt cut to fit, served or trained on."""
        budget = self.sampling.max_prompt_tokens
        n = self.prompt_tokens(req.messages, req.tools)
        if n <= budget:
            return None
        body = openai_error(f"This model's maximum context length is {budget} tokens (model.max_prompt_tokens). "
                            f"However, your messages resulted in {n} tokens. Please reduce the length of the "
                            "messages or tools.")
        body["error"].update(code="context_length_exceeded", param="messages")
        return body

    def _request(self, body: dict, headers) -> _Request:
        req = parse_request(body, self.special_tokens)
        refuse_what_cannot_be_honoured(req)
        return _Request(headers.get("X-Session-Id") or None, turn_type_of(headers.get("X-Turn-Type")),
                        _truthy(headers.get("X-Session-Done")), headers.get("X-Session-Token") or None,
                        plain_messages(req.messages), req.tools or None,
                        req.sampling(self.sampling, self.max_tokens_cap or self.sampling.max_new_tokens),
                        req.seed, bool(req.stream), bool(req.tools) and req.tool_choice != "none",
                        req.include_usage)

    def _streamed(self, req: _Request, version: int, token: str | None) -> Iterator[bytes]:
        """The reply's events as the policy server samples it. The step is recorded once the reply is
        complete: a client gone mid-stream never saw it."""
        events = EventStream(self.model_name)
        yield events.start()
        sent, gen = "", None
        for text, final in self.policy.stream(req.messages, tools=req.tools, sampling=req.sampling, seed=req.seed,
                                              session=req.session):  # a session's turns to one server: its prefix cache
            if final is not None:
                gen = final
                break
            shown = shown_so_far(text, req.sampling.stop, req.parse_tools)
            if len(shown) > len(sent) and shown.startswith(sent):
                yield events.delta({"content": shown[len(sent):]})
                sent = shown
        self._record(req, gen, version, token)
        done = completion(gen, self.model_name, parse_tool_calls=req.parse_tools, stop=req.sampling.stop)
        yield from events.closing(done, sent, include_usage=req.include_usage)

    def _record(self, req: _Request, gen, version: int, token: str | None) -> None:
        done = self.book.record(req.session, req.turn_type, req.messages, gen, version, req.done, tools=req.tools,
                                token=token or "", shown=until_stop(gen.text, req.sampling.stop))
        with self._lock:
            self.served += 1
            self.recorded += len(done)

    def next_step(self, group_no: int, gate: Gate):
        """Step `group_no`, the next completed one, as a one-step trajectory (blocks; `Stopped` once
        stopping). The loops number their groups as the book numbers its steps, which a resume relies on;
        they ask for group n once they hold every step before it, so a restarted endpoint, whose book
        replays the journal from the last checkpoint, skips what they hold."""
        while True:
            if gate.stopping:
                raise Stopped
            try:
                s = self.book.steps.get(timeout=0.05)
            except queue.Empty:
                continue
            if s.no < group_no:  # replayed by an endpoint Ray restarted: the loops hold it already
                continue
            if s.no != group_no:
                raise RuntimeError(f"the proxy's step {s.no} reached the loops as group {group_no}")
            return s.version, ([Trajectory(task_id=s.session, env_id="proxy", steps=[s.step])],
                               {s.session: self.book.tools[s.session]} if s.session in self.book.tools else {})

    def stats(self) -> dict:
        return {"version": self.gate.version, "served": self.served, "steps_recorded": self.recorded,
                "open_sessions": self.book.open_sessions, "unanswered": self.book.unanswered,
                "steps_waiting": self.book.steps.qsize()}
