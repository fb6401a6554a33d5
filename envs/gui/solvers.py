"""Scripted solvers: policies that read only what the agent reads (the goal and the rendered
accessibility tree) and answer only in the env's action language.

A solver is `solve(goal, lines, history) -> action | None` (None: finished), called once per step
on the current page. The env runs one on a private copy of the episode to produce the oracle's
reference actions (see GUIEnv.reference_actions); the tests also run them directly.

MiniWoB solvers exist for the tasks below; bundled apps carry a declarative `solution:` in their
app.yaml (steps like `click: button "Save"`) that `StepsSolver` resolves against the live page.
"""
from __future__ import annotations

import re
from typing import Callable, Protocol

from envs.gui.a11y import Line
from envs.gui.actions import GUIAction


class SolverError(RuntimeError):
    """The solver cannot find what it needs on the page (a broken task or a changed page)."""


class Solver(Protocol):
    def __call__(self, goal: str, lines: list[Line], history: list[str]) -> str | None: ...


def _quoted(goal: str) -> list[str]:
    return re.findall(r'"([^"]*)"', goal)


def _find(lines: list[Line], role: str, name: str | None = None) -> list[Line]:
    return [ln for ln in lines if ln.ref and ln.role == role and (name is None or ln.name == name)]


def _one(lines: list[Line], role: str, name: str | None = None) -> Line:
    found = _find(lines, role, name)
    if not found:
        raise SolverError(f"no {role} {name!r} on the page")
    return found[0]


def _click(ln: Line) -> str:
    return GUIAction("click", ref=ln.ref).render()


def _type(ln: Line, text: str) -> str:
    return GUIAction("type", ref=ln.ref, text=text).render()


# -- MiniWoB -----------------------------------------------------------------------------------
def click_button(goal, lines, history):
    if history:
        return None
    return _click(_one(lines, "button", _quoted(goal)[0]))


def click_link(goal, lines, history):
    if history:
        return None
    word = _quoted(goal)[0]
    for ln in lines:
        if ln.ref and ((ln.role == "link" and ln.name == word) or (ln.role == "generic" and ln.text == word)):
            return _click(ln)
    raise SolverError(f"no link {word!r}")


def enter_text(goal, lines, history):
    box = _one(lines, "textbox")
    if not history:
        return _type(box, _quoted(goal)[0])
    if len(history) == 1:
        return _click(_one(lines, "button", "Submit"))
    return None


def click_checkboxes(goal, lines, history):
    m = re.match(r"Select (.*) and click Submit\.", goal)
    if not m:
        raise SolverError(f"unexpected goal {goal!r}")
    wanted = set() if m.group(1) == "nothing" else set(m.group(1).split(", "))
    if history and history[-1].startswith("click(") and history[-1] == _click(_one(lines, "button", "Submit")):
        return None
    for box in _find(lines, "checkbox"):
        if (box.name in wanted) != ("checked" in box.props):
            return _click(box)
    return _click(_one(lines, "button", "Submit"))


def focus_text(goal, lines, history):
    return None if history else _click(_one(lines, "textbox"))


def login_user(goal, lines, history):
    user, password = _quoted(goal)[:2]
    boxes = _find(lines, "textbox")
    if len(boxes) < 2:
        raise SolverError("expected a username and a password field")
    plan = [_type(boxes[0], user), _type(boxes[1], password), _click(_one(lines, "button", "Login"))]
    return plan[len(history)] if len(history) < len(plan) else None


def enter_password(goal, lines, history):
    password = _quoted(goal)[0]
    boxes = _find(lines, "textbox")
    plan = [_type(boxes[0], password), _type(boxes[1], password), _click(_one(lines, "button", "Submit"))]
    return plan[len(history)] if len(history) < len(plan) else None


def click_test(goal, lines, history):
    return None if history else _click(_find(lines, "button")[0])


MINIWOB_SOLVERS: dict[str, Callable] = {
    "click-button": click_button,
    "click-link": click_link,
    "enter-text": enter_text,
    "click-checkboxes": click_checkboxes,
    "focus-text": focus_text,
    "login-user": login_user,
    "enter-password": enter_password,
    "click-test": click_test,
}


# -- bundled apps ------------------------------------------------------------------------------
_TARGET = re.compile(r'^\s*(?P<role>[^\s"]+)\s*(?:"(?P<name>(?:[^"\\]|\\.)*)")?\s*$')


def resolve(target: str, lines: list[Line]) -> Line:
    """`role "name"` -> the first line with that role and name (or, for text-only elements such as
    clickable spans, that text)."""
    m = _TARGET.match(target)
    if not m:
        raise SolverError(f"bad target {target!r}; write it as role \"name\"")
    role, name = m.group("role"), (m.group("name") or "").replace('\\"', '"')
    for ln in lines:
        if ln.ref and ln.role == role and (ln.name == name or (not ln.name and ln.text == name)):
            return ln
    raise SolverError(f"no {role} {name!r} on the page")


class StepsSolver:
    """Replays an app task's declarative `solution:` steps, finding each target on the live page."""

    def __init__(self, steps: list[dict]):
        self.steps = steps

    def __call__(self, goal: str, lines: list[Line], history: list[str]) -> str | None:
        if len(history) >= len(self.steps):
            return None
        (kind, arg), = self.steps[len(history)].items()
        if kind == "click":
            return _click(resolve(arg, lines))
        if kind in ("type", "select"):
            target, text = arg
            return GUIAction(kind, ref=resolve(target, lines).ref, text=str(text)).render()
        if kind == "press":
            return GUIAction("press", text=str(arg)).render()
        if kind == "scroll":
            return GUIAction("scroll", dx=int(arg[0]), dy=int(arg[1])).render()
        raise SolverError(f"unknown solution step {kind!r}")
