"""What a chat-completions request may ask of the proxy: checked before anything is sampled, so that a
bad request gets a 400 naming its field, never a 500, a dropped connection or a stalled server.

- The sampling fields are typed, finite and in range: `temperature` 0..2 (below `GREEDY_BELOW`, greedy:
  a smaller divisor underflows the logits), `top_p` in (0, 1], `max_tokens`/`max_completion_tokens` an
  integer >= 1, `seed` a 64-bit signed integer, `n` 1. `max_tokens` over `mode.max_tokens_cap` is
  clamped to the cap (the reply then ends with finish_reason "length"), so no request holds the
  policy server for longer than a capped reply.
- `stream` is a boolean, `stream_options` an object whose `include_usage` is a boolean.
- The body nests at most `MAX_DEPTH` deep, and holds no lone surrogate (text that is no UTF-8).
- No message or tool holds one of the chat template's special tokens (read from the tokenizer:
  `<|im_start|>`, `<|im_end|>`, `<|endoftext|>` ... for SmolLM2): the template would read them as real
  turns (a forged system turn). Such a request is refused, not escaped: the client learns of it.
  Roles are plain words (a newline in one would also start a turn of the writer's choosing).
"""
from __future__ import annotations

import math
from dataclasses import replace

from agents.serving.transformers_policy import SamplingConfig, stop_strings
from trainers.proxy.openai_wire import BadRequest

MAX_DEPTH = 32  # a tool's JSON schema nests a few levels; json.loads itself fails near 1000
GREEDY_BELOW = 1e-3  # float32 logits divided by less may overflow; sampling is greedy in effect anyway
SEED_RANGE = (-2**63, 2**63 - 1)  # what torch.Generator.manual_seed takes


def special_tokens_of(tokenizer) -> tuple[str, ...]:
    """The tokenizer's special tokens, each of which a text may not carry into the chat template."""
    tokens = set(tokenizer.all_special_tokens)
    tokens |= {t.content for t in getattr(tokenizer, "added_tokens_decoder", {}).values() if t.special}
    return tuple(sorted(t for t in tokens if t))


def check_shape(body: dict, special_tokens: tuple[str, ...] = ()) -> None:
    """The body's nesting and text (without recursion: a deep body cannot exhaust the stack here).
    Special tokens are looked for in `messages` and `tools`, the text the chat template renders."""
    stack = [(body, "body", 0, False)]
    while stack:
        node, where, depth, rendered = stack.pop()
        if depth > MAX_DEPTH:
            raise BadRequest(f"{where}: the request nests deeper than {MAX_DEPTH} levels")
        if isinstance(node, str):
            _check_text(node, where, special_tokens if rendered else ())
        elif isinstance(node, dict):
            for k, v in node.items():
                _check_text(k, f"{where} key", ())
                here = k if where == "body" else f"{where}.{k}"
                stack.append((v, here, depth + 1, rendered or (where == "body" and k in ("messages", "tools"))))
        elif isinstance(node, list):
            stack.extend((v, f"{where}[{i}]", depth + 1, rendered) for i, v in enumerate(node))


def _check_text(text: str, where: str, special_tokens: tuple[str, ...]) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise BadRequest(f"{where} holds a lone surrogate (\\ud800-\\udfff without its pair): not text") from None
    for token in special_tokens:
        if token in text:
            raise BadRequest(f"{where} contains the chat template's special token {token!r}; the proxy refuses "
                             "it rather than let text start or end a turn")


def _number(body: dict, key: str, default: float, lo: float, hi: float, *, lo_open: bool = False) -> float:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise BadRequest(f"{key} must be a finite number, got {value!r}")
    if value < lo or (lo_open and value == lo) or value > hi:
        raise BadRequest(f"{key} must be {'>' if lo_open else '>='} {lo} and <= {hi}, got {value!r}")
    return float(value)


def _integer(body: dict, key: str, lo: int, hi: int | None = None) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)  # 100.0 is 100
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"{key} must be an integer, got {value!r}")
    if value < lo or (hi is not None and value > hi):
        raise BadRequest(f"{key} must be between {lo} and {hi}, got {value}" if hi is not None else
                         f"{key} must be at least {lo}, got {value}")
    return value


def sampling_of(body: dict, defaults: SamplingConfig, max_tokens_cap: int) -> SamplingConfig:
    """The request's sampling: its fields checked, absent ones (or nulls) the defaults, `max_tokens`
    clamped to the cap."""
    try:
        stop = stop_strings(body.get("stop"))
    except ValueError as e:
        raise BadRequest(str(e)) from None
    asked = [v for v in (_integer(body, "max_completion_tokens", 1), _integer(body, "max_tokens", 1))
             if v is not None]
    max_tokens = min(asked[0] if asked else defaults.max_new_tokens, max_tokens_cap)
    temperature = _number(body, "temperature", defaults.temperature, 0.0, 2.0)
    top_p = _number(body, "top_p", defaults.top_p, 0.0, 1.0, lo_open=True)
    return replace(defaults, max_new_tokens=max_tokens, temperature=0.0 if temperature < GREEDY_BELOW else temperature,
                   top_p=top_p, stop=stop)


def seed_of(body: dict) -> int | None:
    return _integer(body, "seed", *SEED_RANGE)


def stream_of(body: dict) -> tuple[bool, bool]:
    """(stream, stream_options.include_usage), each a boolean or absent."""
    stream, options = body.get("stream"), body.get("stream_options")
    if stream is not None and not isinstance(stream, bool):
        raise BadRequest(f"stream must be a boolean, got {stream!r}")
    if options is not None and not isinstance(options, dict):
        raise BadRequest(f"stream_options must be an object, got {options!r}")
    usage = (options or {}).get("include_usage")
    if usage is not None and not isinstance(usage, bool):
        raise BadRequest(f"stream_options.include_usage must be a boolean, got {usage!r}")
    return bool(stream), bool(usage)
