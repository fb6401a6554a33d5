"""The OpenAI chat-completions wire format, in and out of NextState's own convention (for the proxy).

In: messages as OpenAI clients send them (checked by the schema, trainers/proxy/request.py) become
role/content strings for the chat template. An
assistant message's `tool_calls` become `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`
blocks in its content, the convention the policy writes and the tool-call env trains, so the model
reads its earlier calls the way it made them. Tool results keep the role `tool`.

Out: a reply becomes a `chat.completion`. When the request offered `tools` (and `tool_choice` is not
"none"), well-formed `<tool_call>` blocks become `message.tool_calls` with finish_reason "tool_calls",
and the rest of the text is the content, so agent frameworks run the calls. A reply whose blocks do
not parse stays plain content: the client shows it, and whatever the user answers is its next state.
With `stream=true` the reply goes out as server-sent events (`chat.completion.chunk`s, then
`data: [DONE]`) while it is sampled, token by token where the policy streams (`shown_so_far` holds
back what may turn into a stop string or a tool call); otherwise whole, in one chunk.
"""
from __future__ import annotations

import json
import time
import uuid

from envs.toolcall.parse import ToolCall, scan_calls
from nextstate.types import Generation
from trainers.proxy.request import BadRequest, ChatRequest, Message, parse_messages
from trainers.proxy.request import ToolCall as OpenAIToolCall

__all__ = ["BadRequest", "EventStream", "completion", "plain_messages", "refuse_what_cannot_be_honoured",
           "shown_so_far", "until_stop"]


def _call_block(call: OpenAIToolCall, where: str) -> str:
    """One OpenAI tool call (`{"function": {"name", "arguments": "<JSON text>"}}`) as a `<tool_call>` block."""
    arguments = call.function.arguments or "{}"
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as e:
            raise BadRequest(f"{where}: function.arguments is not JSON ({e.msg})") from None
        except RecursionError:
            raise BadRequest(f"{where}: function.arguments nests too deeply") from None
    if not isinstance(arguments, dict):
        raise BadRequest(f"{where}: function.arguments must be a JSON object")
    return ToolCall(call.function.name, arguments).render()


def plain_messages(messages: list[Message] | list) -> list[dict[str, str]]:
    """The request's messages (checked by the schema, trainers/proxy/request.py; raw ones are checked
    here) as role/content strings, or `BadRequest` saying what is wrong."""
    if not (isinstance(messages, list) and messages and all(isinstance(m, Message) for m in messages)):
        messages = parse_messages(messages)
    out = []
    for i, m in enumerate(messages):
        text = m.text()
        blocks = [_call_block(c, f"messages[{i}].tool_calls[{j}]") for j, c in enumerate(m.tool_calls or [])]
        out.append({"role": m.role, "content": "\n".join([text, *blocks] if text else blocks)})
    return out


def refuse_what_cannot_be_honoured(req: ChatRequest) -> None:
    """A 400 for a parameter that would change the reply in a way the proxy cannot carry out, rather
    than a reply that silently ignores it (a client asking for JSON mode would get free text). Such
    parameters at their defaults, and ones that do not change the reply (`user`, `metadata`,
    `parallel_tool_calls` ...), pass."""
    if req.n is not None and req.n != 1:
        raise BadRequest(f"n must be 1: the proxy samples one reply per request (got {req.n!r})")
    if req.response_format is not None and req.response_format.get("type") != "text":
        raise BadRequest("response_format: the proxy samples free text only (no JSON mode or schema)")
    if req.tool_choice is not None and req.tool_choice not in ("auto", "none"):
        raise BadRequest("tool_choice: only \"auto\" and \"none\"; the proxy cannot force a call")
    if req.logprobs or req.top_logprobs:
        raise BadRequest("logprobs: the proxy does not return them (the trainer keeps them for itself)")
    for name in ("frequency_penalty", "presence_penalty"):
        if getattr(req, name):
            raise BadRequest(f"{name}: not supported; leave it at 0")
    if req.logit_bias:
        raise BadRequest("logit_bias: not supported")


def until_stop(text: str, stop: tuple[str, ...]) -> str:
    """The text before the first stop string, as OpenAI returns it (the policy stops after one)."""
    cut = min((i for i in (text.find(st) for st in stop) if i >= 0), default=len(text))
    return text[:cut]


def completion(gen: Generation, model: str, *, parse_tool_calls: bool, stop: tuple[str, ...] = ()) -> dict:
    """The `chat.completion` for one reply; its calls as `tool_calls` when the client offered tools.
    The text ends before a stop string (the step trained on keeps it: its tokens were sampled)."""
    text = until_stop(gen.text, stop) if stop else gen.text
    message: dict = {"role": "assistant", "content": text}
    finish_reason = gen.finish_reason
    if parse_tool_calls:
        calls, text, error = scan_calls(text)
        if error is None and calls:
            message = {"role": "assistant", "content": text or None, "tool_calls": [
                {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
                 "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}
                for name, args in calls]}
            finish_reason = "tool_calls"
    prompt, reply = len(gen.prompt_token_ids), len(gen.token_ids)
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": reply, "total_tokens": prompt + reply}}


def shown_so_far(text: str, stop: tuple[str, ...], tool_calls: bool) -> str:
    """The part of a reply still being sampled that a streaming client may see now: up to a stop
    string, and before anything that is, or may become, a stop string or a `<tool_call>` block (a
    call goes out whole, as `tool_calls`, once the reply is done). A trailing half-decoded character
    waits for its other bytes."""
    shown = until_stop(text, stop) if stop else text
    held = [*stop, "<tool_call>"] if tool_calls else list(stop)
    if tool_calls and "<tool_call>" in shown:
        shown = shown[:shown.index("<tool_call>")]
    for h in held:  # a suffix that may grow into `h`
        for k in range(min(len(h) - 1, len(shown)), 0, -1):
            if shown.endswith(h[:k]):
                shown = shown[:-k]
                break
    return shown.rstrip("\ufffd")


class EventStream:
    """The server-sent events of one streamed `chat.completion` (OpenAI's `chat.completion.chunk`s)."""

    def __init__(self, model: str):
        self.head = {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "created": int(time.time()), "model": model}

    def _event(self, obj: dict) -> bytes:
        chunk = {**self.head, "object": "chat.completion.chunk", **obj}
        return f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode()

    def delta(self, delta: dict, finish_reason: str | None = None) -> bytes:
        return self._event({"choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]})

    def start(self) -> bytes:
        return self.delta({"role": "assistant", "content": ""})

    def closing(self, done: dict, sent: str = "", *, include_usage: bool = False):
        """The events after the `sent` text: the rest of the content, the tool calls (each whole, with
        its index), the finish reason, optionally the usage, then `[DONE]`."""
        choice = done["choices"][0]
        message = choice["message"]
        content = message.get("content") or ""
        if content.startswith(sent) and len(content) > len(sent):
            yield self.delta({"content": content[len(sent):]})
        for i, call in enumerate(message.get("tool_calls") or []):
            yield self.delta({"tool_calls": [{"index": i, **call}]})
        yield self.delta({}, choice["finish_reason"])
        if include_usage:
            yield self._event({"choices": [], "usage": done["usage"]})
        yield b"data: [DONE]\n\n"

