"""How a tool-calling agent's reply becomes calls, in the Qwen/Hermes convention.

A call is `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`; several blocks in one reply are
parallel calls, run in order. A reply with no block is plain text: a message or the final answer.
Whitespace around and inside the tags is tolerated; the JSON is parsed strictly (no Python literals,
no NaN, no trailing commas), and `<think>...</think>` reasoning is ignored, so a call that only
appears in the model's thoughts is not made. JSON nested deeper than `MAX_DEPTH` is refused (it
would exhaust the interpreter's stack here or in whatever walks the arguments later). Anything
malformed is reported as a reason string that the env turns into an error next state; nothing here
raises on the agent's input.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

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


_STRICT = json.JSONDecoder(parse_constant=_reject_constant)
# Deeper arguments than any tool takes (BFCL's deepest are a few levels) but far below the stack:
# the checkers, canonical_args and json.dumps all recurse once per level.
MAX_DEPTH = 64
_TOO_DEEP = f"is nested more than {MAX_DEPTH} levels deep; tool arguments are never that deep"
_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_OPEN, _CLOSE = "<tool_call>", "</tool_call>"
_EMPTY = "empty reply: call a tool with <tool_call>{...}</tool_call>, or answer in plain text"
_UNBALANCED = 'unbalanced <tool_call> tags: each call must be <tool_call>{"name": ..., "arguments": {...}}</tool_call>'


def _calls(blocks: list[str], text: str) -> tuple[list[tuple[str, dict]], str, str | None]:
    """The calls, or the reason the first bad block is bad."""
    calls = []
    for i, raw in enumerate(blocks, 1):
        try:
            obj = _STRICT.decode(raw)
        except RecursionError:
            return [], text, f"{_where(i, blocks)} {_TOO_DEEP}"
        except json.JSONDecodeError as e:
            return [], text, f"{_where(i, blocks)} is not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})"
        except ValueError as e:
            return [], text, f"{_where(i, blocks)} is not valid JSON: {e}"
        if raw.count("[") + raw.count("{") > MAX_DEPTH and _depth(obj) > MAX_DEPTH:  # counts are cheap
            return [], text, f"{_where(i, blocks)} {_TOO_DEEP}"
        if not isinstance(obj, dict):
            return [], text, (f'{_where(i, blocks)} must be a JSON object with "name" and "arguments", '
                              f'got {type(obj).__name__}')
        name = obj.get("name")
        if not isinstance(name, str) or not name.strip():
            return [], text, f'{_where(i, blocks)} has no "name" string'
        args = obj.get("arguments", {})
        if not isinstance(args, dict):
            return [], text, (f'{_where(i, blocks)} to {name!r}: "arguments" must be a JSON object, '
                              f'got {type(args).__name__}')
        calls.append((name.strip(), args))
    return calls, text, None


def _depth(obj: Any) -> int:
    """How deeply lists and objects nest in a decoded JSON value (a scalar is 0), without recursion."""
    deepest, stack = 0, [(obj, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            v = v.values()
        elif not isinstance(v, list):
            continue
        deepest = max(deepest, d)
        if d <= MAX_DEPTH:  # deeper than that is all a caller needs to know
            stack.extend((x, d + 1) for x in v)
    return deepest


def scan_calls(reply: str) -> tuple[list[tuple[str, dict]], str, str | None]:
    """The reply's calls as (name, arguments) pairs, its text, and the reason it is malformed (None
    when it is not); `parse_reply` without the objects. A block runs from a `<tool_call>` to the first
    `</tool_call>` after it; a tag left in the text outside blocks makes the reply malformed."""
    if not isinstance(reply, str):
        return [], "", f"the reply must be text, got {type(reply).__name__}"
    body = _THINK.sub("", reply)
    if "<think>" in body:  # unfinished reasoning: nothing after it counts
        body = body.split("<think>", 1)[0]
    parts = _BLOCK.split(body)
    blocks, text = parts[1::2], "".join(parts[0::2]).strip()
    if text and (_OPEN in text or _CLOSE in text):
        return [], text, _UNBALANCED
    if not blocks and not text:
        return [], text, _EMPTY
    return _calls(blocks, text)


def _where(i: int, blocks: list) -> str:
    return f"tool call {i}" if len(blocks) > 1 else "the tool call"


def parse_reply(reply: str) -> ParsedReply:
    calls, text, error = scan_calls(reply)
    if error is not None:
        return ParsedReply(text=text, error=error, source=reply if isinstance(reply, str) else repr(reply))
    return ParsedReply(calls=tuple(ToolCall(n, a) for n, a in calls), text=text, source=reply)


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
