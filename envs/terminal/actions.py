"""How a terminal agent's reply becomes an action.

Convention (also in the system prompt, conf/env/terminal.yaml):
- commands go in a fenced ```bash block (several blocks run in order); a reply that is a single bare
  line is taken as the command itself;
- a line `DONE` on its own (outside a block) ends the episode, after any command in the same reply.
Anything else (empty, binary junk, prose without a command) is an error the agent is told about.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# Every fenced block, whatever its language, so that one block's closing fence is never read as the
# next one's opening (a ```bash block after a ```python one was dropped); only shell blocks are run.
_FENCE = re.compile(r"```[ \t]*([^\s`]*)[^\n`]*\n(.*?)```", re.DOTALL)
_SHELL = {"", "bash", "sh", "shell", "console", "zsh"}
_DONE = re.compile(r"^\s*DONE\s*\.?\s*$", re.MULTILINE)


@dataclass(frozen=True)
class ParsedAction:
    command: str | None = None
    done: bool = False
    error: str | None = None


def _is_junk(text: str) -> bool:
    if "\x00" in text or "\ufffd" in text:
        return True
    printable = sum(ch.isprintable() or ch in "\n\t\r" for ch in text)
    return printable < 0.9 * len(text)


def parse_action(reply: str, done_token: str = "DONE") -> ParsedAction:
    if not isinstance(reply, str) or not reply.strip():
        return ParsedAction(error="empty reply: send a command in a ```bash block, or DONE when finished")
    if _is_junk(reply):
        return ParsedAction(error="the reply is not readable text (binary or control characters)")
    done_re = _DONE if done_token == "DONE" else re.compile(
        rf"^\s*{re.escape(done_token)}\s*\.?\s*$", re.MULTILINE)
    fenced = _FENCE.findall(reply)
    blocks = [b.strip("\n") for lang, b in fenced if lang.lower() in _SHELL]
    others = sorted({lang for lang, _ in fenced if lang.lower() not in _SHELL})
    outside = _FENCE.sub("", reply)
    done = bool(done_re.search(outside))
    command = "\n".join(b for b in blocks if b.strip()) or None
    if command is None and not done:
        lines = [ln for ln in reply.strip().splitlines() if ln.strip()]
        if len(lines) == 1 and "```" not in lines[0]:
            command = lines[0].strip().strip("`").strip() or None
        if command is None:
            skipped = f" (only bash blocks are run, not {', '.join(others)})" if others else ""
            return ParsedAction(error=f"no command found{skipped}: put one command in a ```bash block, "
                                      f"or reply {done_token} on its own line when the task is finished")
    return ParsedAction(command=command, done=done)
