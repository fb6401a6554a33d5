"""The bundled web apps (envs/tasks/gui/<app>/): each an `index.html` (plain HTML + JS, no build
step, no network) and an `app.yaml` listing its tasks:

    app: todo
    page: index.html
    tasks:
      - id: add-and-complete
        split: train
        goal: Add a task "Buy milk" and mark "Pay rent" as done.
        query: "?list=home"          # optional, appended to the page URL
        expect:                        # read from the app's state after the agent says done()
          items.0.title: Buy milk
          done_titles: {$set: [Pay rent]}
        solution:                      # the scripted solver's steps (gui_solvers.StepsSolver)
          - type: [textbox "New task", Buy milk]
          - press: Enter

Every page exposes `window.__app.state()`, a JSON snapshot of what the app holds (including what it
saved to its storage). The success check compares paths of that state with `expect`; the agent
never sees the check. Expectation forms: a plain value (equal), {$set: [...]} (same items, any
order), {$len: n}, {$contains: text} (case-insensitive substring), {$absent: true}.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from nextstate.types import Task

STATE_JS = "() => (window.__app && typeof window.__app.state === 'function') ? window.__app.state() : null"
_MISSING = object()


def load_app_tasks(apps_dir: Path, split: str | None) -> list[Task]:
    tasks = []
    for spec_file in sorted(Path(apps_dir).glob("*/app.yaml")):
        spec = yaml.safe_load(spec_file.read_text())
        app = spec["app"]
        for t in spec["tasks"]:
            task = Task(task_id=f"{app}/{t['id']}", env="gui", instruction=t["goal"].strip(),
                        split=t.get("split", "train"), difficulty=t.get("difficulty", "medium"),
                        tags=("app", app), path=spec_file.parent,
                        data={"suite": "apps", "path": f"{spec_file.parent.name}/{spec.get('page', 'index.html')}"
                                                      + t.get("query", ""),
                              "expect": t["expect"], "solution": t.get("solution") or []})
            if split is None or task.split == split:
                tasks.append(task)
    return tasks


def _get(state: Any, path: str) -> Any:
    cur = state
    for part in path.split("."):
        if isinstance(cur, list) and part.lstrip("-").isdigit():
            i = int(part)
            cur = cur[i] if -len(cur) <= i < len(cur) else _MISSING
        elif isinstance(cur, dict):
            cur = cur.get(part, _MISSING)
        else:
            return _MISSING
        if cur is _MISSING:
            return _MISSING
    return cur


def _norm(v: Any) -> Any:
    """JSON numbers compare by value (1 == 1.0); strings by their trimmed text."""
    if isinstance(v, str):
        return v.strip()
    if isinstance(v, list):
        return [_norm(x) for x in v]
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    return v


def _key(v: Any) -> str:
    return json.dumps(v, sort_keys=True)


def _holds(actual: Any, want: Any) -> bool:
    if isinstance(want, dict) and len(want) == 1 and next(iter(want)).startswith("$"):
        (op, arg), = want.items()
        if op == "$absent":
            return (actual is _MISSING) == bool(arg)
        if actual is _MISSING:
            return False
        if op == "$set":
            return isinstance(actual, list) and sorted(map(_key, _norm(actual))) == sorted(map(_key, _norm(arg)))
        if op == "$len":
            return hasattr(actual, "__len__") and len(actual) == arg
        if op == "$contains":
            return isinstance(actual, str) and str(arg).lower() in actual.lower()
        raise ValueError(f"unknown expectation {op}")
    return actual is not _MISSING and _norm(actual) == _norm(want)


def check(state: Any, expect: dict[str, Any]) -> list[str]:
    """The expectations that do not hold (empty: success)."""
    failed = []
    for path, want in expect.items():
        actual = _get(state, path)
        if not _holds(actual, want):
            shown = "(missing)" if actual is _MISSING else repr(actual)
            failed.append(f"{path}: want {want!r}, got {shown[:200]}")
    return failed
