"""How a SWE agent's reply becomes actions (also described in conf/env/swe.yaml's system prompt).

A reply holds fenced blocks, run in order, and optionally SUBMIT:

    ```bash
    grep -n "def slugify" -r .
    ```

    ```edit textkit/slug.py
    <<<<<<< SEARCH
    _NON_WORD = re.compile(r"[^a-z0-9]")
    =======
    _NON_WORD = re.compile(r"[^a-z0-9]+")
    >>>>>>> REPLACE
    ```

    ```write textkit/new_module.py
    (the whole content of the file)
    ```

    SUBMIT

- `bash` (or sh, shell, or no language): a command for the persistent shell;
- `edit PATH`: str_replace; each SEARCH text must occur exactly once in the file, and is
  replaced by its REPLACE text (several SEARCH/REPLACE pairs apply in order, all or none);
- `write PATH`: creates or overwrites the file with the block's content;
- a line `SUBMIT` (or `DONE`) outside the blocks submits, after the reply's blocks have run.
Other languages (```python ...) are taken as prose. A block that must contain a line of three
backticks is fenced with more backticks (````write ...), as in CommonMark. PATH is relative to
the shell's working directory (the repository, /testbed, unless the agent `cd`s elsewhere).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

_OPEN = re.compile(r"^(`{3,}|~{3,})[ \t]*([A-Za-z_+-]*)[ \t]*(.*?)[ \t]*$")
_SHELL_LANGS = {"", "bash", "sh", "shell", "console", "zsh"}
_EDIT_LANGS = {"edit", "str_replace", "replace"}
_WRITE_LANGS = {"write", "create", "file"}
_SEARCH, _DIVIDER, _REPLACE = "<<<<<<< SEARCH", "=======", ">>>>>>> REPLACE"


@dataclass(frozen=True)
class Shell:
    command: str


@dataclass(frozen=True)
class Replace:
    path: str
    pairs: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Write:
    path: str
    content: str


Op = Shell | Replace | Write


@dataclass(frozen=True)
class ParsedReply:
    ops: tuple[Op, ...] = ()
    submit: bool = False
    error: str | None = None
    notes: tuple[str, ...] = field(default=())  # e.g. ignored blocks, said back to the agent


def _is_junk(text: str) -> bool:
    if "\x00" in text or "\ufffd" in text:
        return True
    printable = sum(ch.isprintable() or ch in "\n\t\r" for ch in text)
    return printable < 0.9 * len(text)


def _blocks(reply: str) -> tuple[list[tuple[str, str, list[str]]], list[str], str | None]:
    """(fenced blocks as (lang, argument, body lines), lines outside blocks, error)."""
    blocks, outside = [], []
    lines = reply.splitlines()
    i = 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if not m:
            outside.append(lines[i])
            i += 1
            continue
        fence, lang, arg = m.group(1), m.group(2).lower(), m.group(3).strip().strip("'\"`")
        close = re.compile(rf"^{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            j += 1
        if j == len(lines):
            return blocks, outside, f"a ```{lang} block opened on line {i + 1} is never closed"
        blocks.append((lang, arg, lines[i + 1:j]))
        i = j + 1
    return blocks, outside, None


def _text(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def _search_replace(path: str, body: list[str]) -> tuple[Replace | None, str | None]:
    pairs, i = [], 0
    stripped = [line.rstrip() for line in body]
    while i < len(body):
        if not stripped[i]:
            i += 1
            continue
        if stripped[i] != _SEARCH:
            return None, (f"edit {path}: expected a line '{_SEARCH}' but found {body[i][:60]!r}; "
                          f"write {_SEARCH} / {_DIVIDER} / {_REPLACE} blocks")
        try:
            mid = stripped.index(_DIVIDER, i + 1)
            end = stripped.index(_REPLACE, mid + 1)
        except ValueError:
            return None, f"edit {path}: a SEARCH section lacks its '{_DIVIDER}' or '{_REPLACE}' line"
        old, new = _text(body[i + 1:mid]), _text(body[mid + 1:end])
        if not old:
            return None, f"edit {path}: a SEARCH section is empty; use a ```write block to create a file"
        pairs.append((old, new))
        i = end + 1
    if not pairs:
        return None, f"edit {path}: no SEARCH/REPLACE pair in the block"
    return Replace(path, tuple(pairs)), None


def parse_reply(reply: str, submit_tokens: tuple[str, ...] = ("SUBMIT", "DONE")) -> ParsedReply:
    if not isinstance(reply, str) or not reply.strip():
        return ParsedReply(error="empty reply: send a ```bash, ```edit PATH or ```write PATH block, "
                                 "or SUBMIT when the fix is done")
    if _is_junk(reply):
        return ParsedReply(error="the reply is not readable text (binary or control characters)")
    blocks, outside, error = _blocks(reply)
    if error:
        return ParsedReply(error=error)
    token = re.compile(r"^\s*(" + "|".join(map(re.escape, submit_tokens)) + r")\s*\.?\s*$")
    submit = any(token.match(line) for line in outside)
    ops: list[Op] = []
    notes = []
    for lang, arg, body in blocks:
        if lang in _SHELL_LANGS and not (lang == "" and arg):
            command = "\n".join(body).strip("\n")
            if command.strip():
                ops.append(Shell(command))
        elif lang in _EDIT_LANGS or lang in _WRITE_LANGS:
            if not arg:
                return ParsedReply(error=f"a ```{lang} block needs a path: ```{lang} path/to/file.py")
            if lang in _WRITE_LANGS:
                ops.append(Write(arg, _text(body)))
            else:
                op, err = _search_replace(arg, body)
                if err:
                    return ParsedReply(error=err)
                ops.append(op)
        else:
            notes.append(f"a ```{lang} block was not run (only bash, edit and write blocks act)")
    if not ops and not submit:
        bare = [line for line in reply.strip().splitlines() if line.strip()]
        if len(bare) == 1 and not blocks:
            return ParsedReply(ops=(Shell(bare[0].strip().strip("`").strip()),))
        return ParsedReply(error="no action found: put a command in a ```bash block, an edit in an "
                                 "```edit PATH or ```write PATH block, or reply SUBMIT on its own line",
                           notes=tuple(notes))
    return ParsedReply(ops=tuple(ops), submit=submit, notes=tuple(notes))


# -- writing replies (the oracle, tests, examples) --------------------------------------------------
def _fence(*texts: str) -> str:
    longest = max([len(m) for t in texts for m in re.findall(r"^[ \t]*(`{3,})", t, re.M)] + [2])
    return "`" * (longest + 1)


def render_shell(command: str) -> str:
    f = _fence(command)
    return f"{f}bash\n{command.rstrip(chr(10))}\n{f}"


def render_replace(path: str, pairs: list[tuple[str, str]]) -> str:
    f = _fence(*(t for pair in pairs for t in pair))
    body = "".join(f"{_SEARCH}\n{old}{_DIVIDER}\n{new}{_REPLACE}\n" for old, new in pairs)
    return f"{f}edit {path}\n{body}{f}"


def render_write(path: str, content: str) -> str:
    f = _fence(content)
    if content and not content.endswith("\n"):
        content += "\n"
    return f"{f}write {path}\n{content}{f}"
