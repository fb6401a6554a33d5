"""How a tool-calling agent's reply becomes calls, in the Qwen/Hermes convention.

A call is `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`; several blocks in one reply are
parallel calls, run in order. A reply with no block is plain text: a message or the final answer.
Whitespace around and inside the tags is tolerated; the JSON is parsed strictly (no Python literals,
no NaN, no trailing commas), and `<think>...</think>` reasoning is ignored, so a call that only
appears in the model's thoughts is not made. Anything malformed is reported as a reason string that
the env turns into an error next state; nothing here raises on the agent's input.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def render(self) -> str:
        """The call as an agent writes it (what the oracle replies with)."""
        body = json.dumps({"name": self.name, "arguments": self.arguments}, ensure_ascii=False)
        return f"<tool_call>\n{body}\n</tool_call>"


@dataclass(frozen=True)
class ParsedReply:
    calls: tuple[ToolCall, ...] = ()
    text: str = ""  # the reply without tool-call and think blocks
    error: str | None = None
    source: str = ""  # the reply as sent (a key for graders that memoize verdicts)


def _reject_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")


_load_strict = json.JSONDecoder(parse_constant=_reject_constant).decode  # built once: ~4 us a call saved


def parse_reply(reply: str) -> ParsedReply:
    if not isinstance(reply, str):
        return ParsedReply(error=f"the reply must be text, got {type(reply).__name__}", source=repr(reply))
    body = reply
    if "<think>" in body:
        body = _THINK.sub("", body)
        if "<think>" in body:  # unfinished reasoning: nothing after it counts
            body = body.split("<think>", 1)[0]
    if "tool_call>" in body:
        parts = _BLOCK.split(body)  # one scan: [text, call, text, call, ..., text]
        blocks, text = parts[1::2], "".join(parts[0::2]).strip()
    else:
        blocks, text = [], body.strip()

    def fail(reason: str) -> ParsedReply:
        return ParsedReply(text=text, error=reason, source=reply)

    if "<tool_call>" in text or "</tool_call>" in text:
        return fail('unbalanced <tool_call> tags: each call must be <tool_call>{"name": ..., '
                    '"arguments": {...}}</tool_call>')
    if not blocks and not text:
        return fail("empty reply: call a tool with <tool_call>{...}</tool_call>, or answer in plain text")
    calls = []
    for i, raw in enumerate(blocks, 1):
        where = f"tool call {i}" if len(blocks) > 1 else "the tool call"
        try:
            obj = _load_strict(raw)
        except json.JSONDecodeError as e:
            return fail(f"{where} is not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})")
        except ValueError as e:
            return fail(f"{where} is not valid JSON: {e}")
        if not isinstance(obj, dict):
            return fail(f'{where} must be a JSON object with "name" and "arguments", got {type(obj).__name__}')
        name = obj.get("name")
        if not isinstance(name, str) or not name.strip():
            return fail(f'{where} has no "name" string')
        args = obj.get("arguments", {})
        if not isinstance(args, dict):
            return fail(f'{where} to {name!r}: "arguments" must be a JSON object, got {type(args).__name__}')
        calls.append(ToolCall(name.strip(), args))
    return ParsedReply(calls=tuple(calls), text=text, source=reply)


def render_calls(calls: list[ToolCall]) -> str:
    return "\n".join(c.render() for c in calls)


def render_tool_responses(contents: list[str], max_chars: int) -> str:
    """Tool results as the agent reads them, one block per call, in call order."""
    out = []
    for c in contents:
        if len(c) > max_chars:
            c = f"{c[:max_chars]}\n[... {len(c) - max_chars} characters cut ...]"
        out.append(f"<tool_response>\n{c}\n</tool_response>")
    return "\n".join(out)
