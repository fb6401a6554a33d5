"""What a chat-completions request may ask of the proxy: OpenAI's request as a pydantic schema, checked
before anything is sampled, so that a bad request gets a 400 naming its field, never a 500, a dropped
connection or a stalled server.

- Every field the proxy reads is typed (strictly: "0.7" is not a number, true is not 1), finite and in
  range: `temperature` 0..2 (below `GREEDY_BELOW`, greedy: a smaller divisor underflows the logits),
  `top_p` in (0, 1], `max_tokens`/`max_completion_tokens` an integer >= 1 (100.0 is 100), `seed` a 64-bit
  signed integer, `stream` a boolean, `stream_options` an object whose `include_usage` is a boolean,
  `stop` a string or a list of them. Fields the proxy does not read pass (`user`, `metadata` ...).
- `max_tokens` over `mode.max_tokens_cap` is clamped to the cap (the reply then ends with finish_reason
  "length"), and the policy server clamps it again to what the model's context leaves after the prompt
  (agents/serving/embedded_server.py): a request asks for at most that much, never for a 400.
- Messages: a role is a plain word (a newline in one would start a turn of the writer's choosing);
  content is a string, null, or a list of parts whose text parts hold strings; tool calls are objects
  with `function.name`.
- Before the schema, one walk over the whole body (`check_shape`): it nests at most `MAX_DEPTH` deep,
  holds no lone surrogate (text that is no UTF-8), and no message or tool holds one of the chat
  template's special tokens (read from the tokenizer: `<|im_start|>`, `<|im_end|>`, `<|endoftext|>` ...
  for SmolLM2): the template would read them as real turns (a forged system turn). Such a request is
  refused, not escaped: the client learns of it.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    TypeAdapter,
    ValidationError,
    field_validator,
)

from agents.serving.transformers_policy import SamplingConfig

MAX_DEPTH = 32  # a tool's JSON schema nests a few levels; json.loads itself fails near 1000
GREEDY_BELOW = 1e-3  # float32 logits divided by less may overflow; sampling is greedy in effect anyway
SEED_RANGE = (-2**63, 2**63 - 1)  # what torch.Generator.manual_seed takes
ROLE = r"^[A-Za-z_][A-Za-z0-9_-]{0,31}$"  # a word: a newline or a token in a role would start a turn


class BadRequest(ValueError):
    """A request the proxy cannot read (answered with HTTP 400 and this message)."""


def _whole(value):
    return int(value) if isinstance(value, float) and math.isfinite(value) and value.is_integer() else value


Whole = Annotated[StrictInt, BeforeValidator(_whole)]  # an integer; 100.0 is 100, 1.5 and "10" are not
Finite = Annotated[float, Field(strict=True, allow_inf_nan=False)]  # a JSON number, not NaN or ±inf


class _Open(BaseModel):
    """OpenAI adds fields over time: those the proxy does not read pass."""
    model_config = ConfigDict(extra="allow")


class Part(_Open):
    type: StrictStr = "text"
    text: Any = ""

    @field_validator("text")
    @classmethod
    def _text_is_a_string(cls, text, info):
        if info.data.get("type") == "text" and not isinstance(text, str):
            raise ValueError(f"must be a string, got {type(text).__name__}")
        return text


class Function(_Open):
    name: StrictStr
    arguments: StrictStr | dict | None = None  # JSON text, as OpenAI sends it (parsed in openai_wire.py)


class ToolCall(_Open):
    function: Function


class Message(_Open):
    role: Annotated[StrictStr, Field(pattern=ROLE)]
    content: StrictStr | list[Part] | None = None
    tool_calls: list[ToolCall] | None = None

    def text(self) -> str:
        """The text parts' text (other parts, such as images, are left out)."""
        if self.content is None or isinstance(self.content, str):
            return self.content or ""
        return "".join(p.text for p in self.content if p.type == "text")


class StreamOptions(_Open):
    include_usage: StrictBool | None = None


class ChatRequest(_Open):
    messages: Annotated[list[Message], Field(min_length=1)]
    tools: list[dict] | None = None
    tool_choice: StrictStr | dict | None = None
    temperature: Annotated[Finite, Field(ge=0, le=2)] | None = None
    top_p: Annotated[Finite, Field(gt=0, le=1)] | None = None
    max_tokens: Annotated[Whole, Field(ge=1)] | None = None
    max_completion_tokens: Annotated[Whole, Field(ge=1)] | None = None
    seed: Annotated[Whole, Field(ge=SEED_RANGE[0], le=SEED_RANGE[1])] | None = None
    n: Whole | None = None
    stream: StrictBool | None = None
    stream_options: StreamOptions | None = None
    stop: Annotated[StrictStr, Field(min_length=1)] | list[Annotated[StrictStr, Field(min_length=1)]] | None = None
    response_format: dict | None = None
    logprobs: StrictBool | None = None
    top_logprobs: Whole | None = None
    frequency_penalty: Finite | None = None
    presence_penalty: Finite | None = None
    logit_bias: dict | None = None

    def sampling(self, defaults: SamplingConfig, max_tokens_cap: int) -> SamplingConfig:
        """The request's sampling: absent fields (or nulls) the defaults, `max_tokens` clamped to the cap."""
        asked = self.max_completion_tokens or self.max_tokens or defaults.max_new_tokens
        temperature = defaults.temperature if self.temperature is None else self.temperature
        stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ())
        return replace(defaults, max_new_tokens=min(asked, max_tokens_cap), stop=stop,
                       temperature=0.0 if temperature < GREEDY_BELOW else temperature,
                       top_p=defaults.top_p if self.top_p is None else self.top_p)

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


_MESSAGES = TypeAdapter(Annotated[list[Message], Field(min_length=1)])
_PHRASES = {"string_type": "must be a string", "int_type": "must be an integer", "bool_type": "must be a boolean",
            "float_type": "must be a finite number", "finite_number": "must be a finite number",
            "list_type": "must be a list", "dict_type": "must be an object", "model_type": "must be an object",
            "missing": "is required", "too_short": "must be non-empty",
            "string_too_short": "must be a non-empty string"}


def parse_request(body, special_tokens: tuple[str, ...] = ()) -> ChatRequest:
    """The body as a `ChatRequest`, or `BadRequest` naming the first field that is wrong."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    check_shape(body, special_tokens)
    try:
        return ChatRequest.model_validate(body)
    except ValidationError as e:
        raise BadRequest(_first_error(e)) from None


def parse_messages(messages) -> list[Message]:
    """`messages` alone (a non-empty list of messages), or `BadRequest`."""
    try:
        return _MESSAGES.validate_python(messages)
    except ValidationError as e:
        raise BadRequest(_first_error(e, "messages")) from None


def _first_error(e: ValidationError, prefix: str = "") -> str:
    """`field.path[0] must be ..., got ...` for the deepest error (a union's members each report one:
    the deepest is the one the client meant)."""
    def path(loc) -> list:  # a union's member tags ('str', 'list[Part]', 'constrained-str') are not fields
        return [p for p in loc if isinstance(p, int) or not (p in ("str", "int", "float", "dict") or "[" in p
                                                             or "-" in p)]

    errors = e.errors(include_url=False)
    deepest = max(len(path(err["loc"])) for err in errors)
    err = next(err for err in errors if len(path(err["loc"])) == deepest)
    where = prefix
    for p in path(err["loc"]):
        where += f"[{p}]" if isinstance(p, int) else (f".{p}" if where else p)
    words = [_PHRASES.get(x["type"]) or x["msg"].removeprefix("Value error, ").replace("Input should be", "must be")
             for x in errors if path(x["loc"]) == path(err["loc"])]
    shown = repr(err.get("input"))
    got = "" if err["type"] in ("missing", "value_error") else f", got {shown[:60]}"
    return f"{where or 'body'} {' or '.join(dict.fromkeys(words))}{got}"


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
