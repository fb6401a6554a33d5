"""Chat templating in one place: messages (+ tools) -> the exact prompt token ids the model sees."""
from __future__ import annotations

from typing import Any


def render_prompt_ids(tokenizer, messages: list[dict[str, str]], tools: list[dict[str, Any]] | None = None,
                      *, add_generation_prompt: bool = True) -> list[int]:
    """Token ids of the templated conversation. `tools` go through the template's `tools=` argument
    when the template supports it; otherwise they are described in the system message."""
    kwargs = {"tools": tools} if tools else {}
    if tools and "tools" not in (tokenizer.chat_template or ""):
        messages = _tools_in_system_message(messages, tools)
        kwargs = {}
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=add_generation_prompt,
                                        tokenize=True, return_dict=False, **kwargs)
    if hasattr(ids, "input_ids"):  # some tokenizers return a BatchEncoding
        ids = ids["input_ids"]
    return list(ids)


def stop_token_ids(tokenizer) -> frozenset[int]:
    """The tokens that end a reply: EOS and the chat template's end of turn. A reply that stops on one
    keeps it as its last token (as SGLang's `output_ids` do), so the trainer can train the stop."""
    ids = (tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|im_end|>"))
    return frozenset(i for i in ids if isinstance(i, int) and i >= 0)


def _tools_in_system_message(messages, tools):
    listing = "\n".join(tool_signature(t) for t in tools)
    note = ("You can call these tools. To call one, answer with "
            '<tool_call>{"name": ..., "arguments": {...}}</tool_call>\n' + listing)
    if messages and messages[0]["role"] == "system":
        return [{"role": "system", "content": messages[0]["content"] + "\n\n" + note}, *messages[1:]]
    return [{"role": "system", "content": note}, *messages]


def tool_signature(tool: dict[str, Any]) -> str:
    """One line per tool, `- name(arg: type (notes), opt?: type): description`, for templates without
    a tools= slot. It says what the JSON schema says (descriptions, enums, nested schemas as compact
    JSON) in about a third of the tokens, and on a CPU a step's cost grows with its prompt."""
    import json

    fn = tool.get("function", tool)
    params = fn.get("parameters") or {}
    required = set(params.get("required") or ())
    args = []
    for name, prop in (params.get("properties") or {}).items():
        arg = f"{name}{'' if name in required else '?'}: {prop.get('type', 'any')}"
        notes = [prop["description"]] if prop.get("description") else []
        rest = {k: v for k, v in prop.items() if k not in ("type", "description")}
        if rest:
            notes.append(json.dumps(rest, separators=(",", ":"), ensure_ascii=False))
        args.append(arg + (f" ({'; '.join(notes)})" if notes else ""))
    line = f"- {fn['name']}({', '.join(args)})"
    return line + (f": {fn['description']}" if fn.get("description") else "")
