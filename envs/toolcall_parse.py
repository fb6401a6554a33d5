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


_STRICT = json.JSONDecoder(parse_constant=_reject_constant)  # built once: ~4 us a call saved
_load_strict = _STRICT.decode
_scan = _STRICT.scan_once
_JSON_WS = " \t\n\r"
_OPEN, _CLOSE = "<tool_call>", "</tool_call>"
_EMPTY = "empty reply: call a tool with <tool_call>{...}</tool_call>, or answer in plain text"
_UNBALANCED = 'unbalanced <tool_call> tags: each call must be <tool_call>{"name": ..., "arguments": {...}}</tool_call>'


def _split_blocks(body: str) -> tuple[list[str], str]:
    """What `re.split(r"<tool_call>(.*?)</tool_call>", body, flags=re.DOTALL)` gives, by str methods
    (~3x faster): a block runs from the leftmost `<tool_call>` to the first `</tool_call>` after it;
    the text is what is left, joined and stripped. Between two closing tags, that block is what
    follows the first opening tag, so the usual reply is cut by two C splits; a closing tag without
    an opening one before it takes the general walk."""
    segments = body.split(_CLOSE)
    tail = segments.pop()
    blocks, pieces = [], []
    for segment in segments:
        before, opened, block = segment.partition(_OPEN)
        if not opened:
            return _walk_blocks(body)
        pieces.append(before)
        blocks.append(block)
    pieces.append(tail)
    return blocks, "".join(pieces).strip()


def _walk_blocks(body: str) -> tuple[list[str], str]:
    blocks, pieces, pos = [], [], 0
    while True:
        i = body.find(_OPEN, pos)
        if i < 0:
            break
        j = body.find(_CLOSE, i + 11)
        if j < 0:
            break
        pieces.append(body[pos:i])
        blocks.append(body[i + 11:j])
        pos = j + 12
    pieces.append(body[pos:])
    return blocks, "".join(pieces).strip()


_MISSING = object()


def _plain_calls(blocks: list[str]) -> list[tuple[str, dict]] | None:
    """The calls of well-formed blocks (the usual case), or None for `_calls` to say what is wrong:
    the C scanner under `_load_strict`, without its two whitespace regex passes. It makes plain dicts
    and strs, so exact class checks equal the isinstance ones; a block that is not an object, has no
    name or a name that is not a string fails `obj["name"].strip()`."""
    calls = []
    for raw in blocks:
        body = raw.strip(_JSON_WS)
        try:
            obj, end = _scan(body, 0)
            name = obj["name"].strip()
        except (StopIteration, ValueError, KeyError, TypeError, AttributeError):
            return None
        args = obj.get("arguments", _MISSING)
        if end != len(body) or obj.__class__ is not dict or not name:
            return None
        if args.__class__ is not dict:
            if args is not _MISSING:
                return None
            args = {}
        calls.append((name, args))
    return calls


def _calls(blocks: list[str], text: str) -> tuple[list[tuple[str, dict]], str, str | None]:
    """The calls, or the reason the first bad block is bad (the checks `_plain_calls` makes, spelled out)."""
    calls = []
    for i, raw in enumerate(blocks, 1):
        try:
            obj = _load_strict(raw)
        except json.JSONDecodeError as e:
            return [], text, f"{_where(i, blocks)} is not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})"
        except ValueError as e:
            return [], text, f"{_where(i, blocks)} is not valid JSON: {e}"
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


def scan_calls(reply: str) -> tuple[list[tuple[str, dict]], str, str | None]:
    """The reply's calls as (name, arguments) pairs, its text, and the reason it is malformed (None
    when it is not); `parse_reply` without the objects, for graders that count microseconds."""
    if not isinstance(reply, str):
        return [], "", f"the reply must be text, got {type(reply).__name__}"
    body = reply
    if "<think>" in body:
        body = _THINK.sub("", body)
        if "<think>" in body:  # unfinished reasoning: nothing after it counts
            body = body.split("<think>", 1)[0]
    if "tool_call>" not in body:
        text = body.strip()
        return [], text, None if text else _EMPTY
    blocks, text = _split_blocks(body)
    if text and (_OPEN in text or _CLOSE in text):
        return [], text, _UNBALANCED
    if not blocks and not text:
        return [], text, _EMPTY
    calls = _plain_calls(blocks)
    return (calls, text, None) if calls is not None else _calls(blocks, text)


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
