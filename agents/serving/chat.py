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


def _tools_in_system_message(messages, tools):
    import json

    listing = "\n".join(json.dumps(t) for t in tools)
    note = ("You can call these tools. To call one, answer with "
            '<tool_call>{"name": ..., "arguments": {...}}</tool_call>\n' + listing)
    if messages and messages[0]["role"] == "system":
        return [{"role": "system", "content": messages[0]["content"] + "\n\n" + note}, *messages[1:]]
    return [{"role": "system", "content": note}, *messages]
