"""What a GUI action did, as text: the refusal of an action that does too much, the next state (a
diff of the accessibility tree), the observation (that diff, then the page), and MiniWoB's verdict.
Pure functions of their arguments, so the env's step reads as plumbing."""
from __future__ import annotations

import re

from envs.gui.a11y import diff_trees
from envs.gui.actions import GUIAction, pixels
from envs.gui.miniwob import is_success
from nextstate.types import NextState

_FOCUSED = re.compile(r" \[focused\]")


def over_cap(act: GUIAction, c) -> str | None:
    """Why `act` does more than one action may (the agent's doing, told as an error), or None."""
    if act.name == "type" and len(act.text or "") > c.type_max_chars:
        return (f"type() text is {len(act.text)} characters; at most {c.type_max_chars} per action: "
                "nothing was typed")
    if act.name == "press" and len(act.text or "") > c.press_max_chars:
        return (f"press() takes one key or combination (e.g. Control+A), at most {c.press_max_chars} "
                f"characters; got {len(act.text)}: nothing was pressed")
    if act.name == "scroll" and max(abs(act.dx), abs(act.dy)) > c.scroll_max_px:
        return (f"scroll() by at most {c.scroll_max_px} pixels each way per action; got "
                f"({pixels(act.dx)}, {pixels(act.dy)}): nothing was scrolled")
    return None


def page_next_state(act: GUIAction, old: str, tree: str, shot, meta, dialogs,
                    diff_max_lines: int, ignore_focus: bool = False) -> tuple[NextState, str]:
    """`ignore_focus`: a line whose only change is `[focused]` is not a change (every click and type
    moves the focus, and on a small page that doubles the diff)."""
    if ignore_focus:
        old, tree = _FOCUSED.sub("", old), _FOCUSED.sub("", tree)
    d = diff_trees(old, tree, diff_max_lines)
    ended = bool(meta and meta.get("done"))
    if ended:
        reason = f" ({meta['reason']})" if meta.get("reason") else ""
        head = f"{act.render()}: the task ended with reward {float(meta['raw_reward']):.2f}{reason}"
    elif d.changed:
        head = f"{act.render()}: the page changed (+{d.added} -{d.removed} lines)"
    else:
        head = f"{act.render()}: nothing changed on the page"
    parts = [head] + [f"dialog {m}" for m in dialogs]
    if d.text:
        parts.append(d.text)
    text = "\n".join(parts)
    ns = NextState(kind="page", text=text, fields={
        "action": act.render(), "added": d.added, "removed": d.removed, "screenshot": shot,
        "dialogs": dialogs, "task_ended": ended})
    return ns, text


def render_obs(head: str, tree: str, obs_max_chars: int) -> str:
    budget = max(200, obs_max_chars - len(head) - 16)
    if len(tree) > budget:
        tree = tree[:budget] + f"\n[... {len(tree) - budget} more characters of the page cut ...]"
    return f"{head}\n\n[page]\n{tree}" if tree else head


def miniwob_verdict(meta: dict) -> tuple[float, dict]:
    """MiniWoB's page state (METADATA_JS) -> (outcome, info): an unfinished episode scores 0."""
    raw = float(meta["raw_reward"]) if meta["done"] else 0.0
    return raw, {"outcome": raw, "success": bool(meta["done"]) and is_success(raw), "raw_reward": raw,
                 "env_reward": float(meta["env_reward"]) if meta["done"] else 0.0,
                 "miniwob_done": bool(meta["done"]), "reason": meta.get("reason")}


def first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
