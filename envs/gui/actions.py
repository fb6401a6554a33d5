"""How a GUI agent's reply becomes an action.

The action language (also in the system prompt, conf/env/gui.yaml):

    click(ref)            click the element (a real mouse click at its centre)
    type(ref, "text")     replace the field's content by typing "text"
    select(ref, "option") choose an option of a <select> by its label (or value)
    press("Key")          press a key on the focused element: Enter, Tab, ArrowDown, Control+A ...
    scroll(dx, dy)        scroll by (dx, dy) pixels where the pointer is (the page at first)
    done()                the task is finished

`ref` is an element ref from the page's accessibility tree (`e12`, with or without quotes).
One action per reply; it may sit in a code block and among prose, and `done()` may follow it.
A line `DONE` alone is read as `done()` (the harness's scripted agents end that way).
Anything else is an error the agent is told about; nothing here touches the browser. How much one
action may do (text typed, pixels scrolled, keys pressed) is capped by the env (conf/env/gui.yaml).
"""
from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass

NAMES = ("click", "type", "select", "press", "scroll", "done")
_CALL_START = re.compile(r"\b(" + "|".join(NAMES) + r")\s*\(")
_REF = re.compile(r"^e\d+$")
_DONE_LINE = re.compile(r"^\s*DONE\s*\.?\s*$", re.MULTILINE)
ARITY = {"click": 1, "type": 2, "select": 2, "press": 1, "scroll": 2, "done": 0}


@dataclass(frozen=True)
class GUIAction:
    name: str  # one of NAMES
    ref: str | None = None
    text: str | None = None  # type's text, select's option, press's key
    dx: int = 0
    dy: int = 0

    def render(self) -> str:
        """The canonical spelling (what the trajectories and the judge see)."""
        if self.name == "done":
            return "done()"
        if self.name == "click":
            return f"click({self.ref})"
        if self.name in ("type", "select"):
            return f"{self.name}({self.ref}, {_quote(self.text)})"
        if self.name == "press":
            return f"press({_quote(self.text)})"
        return f"scroll({pixels(self.dx)}, {pixels(self.dy)})"


@dataclass(frozen=True)
class ParsedReply:
    action: GUIAction | None = None
    done: bool = False  # the reply also (or only) says done()
    error: str | None = None


def pixels(n: int) -> str:
    """A pixel count as written; one too long to print (an int of thousands of digits cannot be
    turned into text, nor into a float) as its order of magnitude."""
    if abs(n) < 10**15:
        return str(n)
    return f"~{'-' if n < 0 else ''}1e{int(math.log10(abs(n)))}"


def _snip(text: str, n: int = 200) -> str:
    return text if len(text) <= n else f"{text[:n]}... ({len(text)} characters)"


def _quote(s: str | None) -> str:
    return '"' + (s or "").replace("\\", "\\\\").replace('"', '\\"') + '"'


def _call_end(text: str, start: int) -> int | None:
    """Index just past the ')' closing the call whose '(' is at `start`, honouring quotes."""
    depth, i, quote = 0, start, None
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def _find_calls(reply: str) -> list[tuple[str, str]] | str:
    calls = []
    pos = 0
    while (m := _CALL_START.search(reply, pos)) is not None:
        end = _call_end(reply, m.end() - 1)
        if end is None:
            return f"unbalanced parentheses or quotes in {reply[m.start():m.start() + 60]!r}"
        calls.append((m.group(1), reply[m.start():end]))
        pos = end
    return calls


def _arg(node: ast.expr, what: str) -> object:
    if isinstance(node, ast.Name):  # a bare ref (e12) or key (Enter)
        return node.id
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return -node.operand.value  # type: ignore[operator]
    raise ValueError(f"{what} must be a literal")


def parse_call(name: str, call: str) -> GUIAction:
    try:
        tree = ast.parse(call.strip(), mode="eval")
    except SyntaxError as e:
        raise ValueError(f"cannot parse {_snip(call)!r}: {e.msg}") from None
    except ValueError as e:  # e.g. an integer literal of more than 4300 digits
        raise ValueError(f"cannot parse {_snip(call)!r}: {_snip(str(e))}") from None
    node = tree.body
    if not isinstance(node, ast.Call) or node.keywords:
        raise ValueError(f"{_snip(call)!r} is not a plain call like click(e12)")
    if len(node.args) != ARITY[name]:
        raise ValueError(f"{name}() takes {ARITY[name]} argument(s), got {len(node.args)}: {_snip(call)!r}")
    args = [_arg(a, f"argument {i + 1} of {name}()") for i, a in enumerate(node.args)]
    if name == "done":
        return GUIAction("done")
    if name == "press":
        key = args[0]
        if not isinstance(key, str) or not key.strip():
            raise ValueError('press() takes a key name, e.g. press("Enter")')
        return GUIAction("press", text=key.strip())
    if name == "scroll":
        if not all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args):
            raise ValueError("scroll(dx, dy) takes two numbers of pixels, e.g. scroll(0, 300)")
        if not all(isinstance(a, int) or math.isfinite(a) for a in args):  # 1e999 is infinity
            raise ValueError("scroll(dx, dy) takes finite numbers of pixels, e.g. scroll(0, 300)")
        return GUIAction("scroll", dx=int(args[0]), dy=int(args[1]))
    ref = args[0]
    if not isinstance(ref, str) or not _REF.match(ref.strip()):
        raise ValueError(f"{_snip(str(ref))!r} is not an element ref; refs look like e12 (see [ref=...] in the page)")
    if name == "click":
        return GUIAction("click", ref=ref.strip())
    text = args[1]
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        text = str(text)
    if not isinstance(text, str):
        raise ValueError(f'{name}() takes a ref and a string, e.g. {name}(e12, "text")')
    return GUIAction(name, ref=ref.strip(), text=text)


def _is_junk(text: str) -> bool:
    if "\x00" in text or "\ufffd" in text:
        return True
    printable = sum(ch.isprintable() or ch in "\n\t\r" for ch in text)
    return printable < 0.9 * len(text)


def parse_reply(reply: str) -> ParsedReply:
    if not isinstance(reply, str) or not reply.strip():
        return ParsedReply(error="empty reply: send one action, e.g. click(e12), or done() when finished")
    if _is_junk(reply):
        return ParsedReply(error="the reply is not readable text (binary or control characters)")
    found = _find_calls(reply)
    if isinstance(found, str):
        return ParsedReply(error=found)
    done_alias = bool(_DONE_LINE.search(reply))
    if not found:
        if done_alias:
            return ParsedReply(done=True)
        return ParsedReply(error="no action found: reply with one of click(ref), type(ref, \"text\"), "
                                 "select(ref, \"option\"), press(\"Key\"), scroll(dx, dy), done()")
    try:
        actions = [parse_call(name, call) for name, call in found]
    except ValueError as e:
        return ParsedReply(error=str(e))
    dones = [a for a in actions if a.name == "done"]
    acts = [a for a in actions if a.name != "done"]
    if len(acts) > 1:
        return ParsedReply(error=f"one action per reply, got {len(acts)}: "
                                 + ", ".join(a.render() for a in acts))
    if acts and dones and actions.index(dones[0]) < actions.index(acts[0]):
        return ParsedReply(error="done() must come last: the action after it would never run")
    return ParsedReply(action=acts[0] if acts else None, done=bool(dones) or done_alias)
