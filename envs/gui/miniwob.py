"""MiniWoB++ tasks, straight from the pages that ship inside the `miniwob` wheel.

Task id = page name (`click-button`; FlightWoB pages are `flight.<site>`, as miniwob names them).
An episode starts the way miniwob's own env starts one: `Math.seedrandom(seed)`, the data mode
(`core.setDataMode`: the split), `core.startEpisodeReal()`, then wait for `WOB_TASK_READY`.
The goal is MiniWoB's utterance (`core.getUtterance()`).

Reward semantics are MiniWoB's: the page ends the episode itself (`WOB_DONE_GLOBAL`) with a raw
reward in [-1, 1] (`WOB_RAW_REWARD_GLOBAL`, partial credit on some tasks) and a time-scaled one
(`WOB_REWARD_GLOBAL`). The outcome is the raw reward; success is full success only (raw reward 1),
so partial credit never counts as success. An episode the agent ends (done()) before the page
did has raw reward 0, as miniwob reports for an unfinished episode.

Timer: each page sets `core.EPISODE_MAX_TIME` (7-30 s); a model on a CPU needs longer, so
`miniwob_episode_ms` overrides it (null keeps the page's own).
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

from nextstate.types import Task

# MiniWoB's window and task-area sizes (miniwob/constants.py): the viewport, and the screenshot crop.
WINDOW = (500, 320)
TASK_AREA = (160, 210)
FLIGHT_WINDOW = (600, 800)
FLIGHT_TASK_AREA = (375, 667)

# Harness chrome, not the task: MiniWoB's reward/timer display, click canvas and START cover.
HIDE_CHROME_CSS = "#reward-display,#click-canvas,#sync-task-cover{display:none !important}"

START_JS = """async ([seed, maxMs, mode, css]) => {
  const style = document.createElement('style'); style.textContent = css; document.head.appendChild(style);
  Math.seedrandom(seed);
  if (maxMs !== null) core.EPISODE_MAX_TIME = maxMs;
  core.setDataMode(mode);
  core.startEpisodeReal();
  for (let i = 0; i < 200 && !WOB_TASK_READY; i++) await new Promise(r => setTimeout(r, 25));
  const u = core.getUtterance();
  return {ready: !!WOB_TASK_READY, utterance: (u && typeof u === 'object') ? u.utterance : u};
}"""

METADATA_JS = """() => ({done: WOB_DONE_GLOBAL, raw_reward: WOB_RAW_REWARD_GLOBAL, env_reward: WOB_REWARD_GLOBAL,
                      reason: WOB_REWARD_REASON == null ? null : String(WOB_REWARD_REASON)})"""


def html_dir() -> Path:
    """The wheel's html/ directory, found without importing miniwob (which pulls in selenium)."""
    spec = importlib.util.find_spec("miniwob")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the `miniwob` package is not installed (pip install miniwob)")
    return Path(next(iter(spec.submodule_search_locations))) / "html"


def load_miniwob_tasks(split: str | None) -> list[Task]:
    """Every page of the wheel. MiniWoB has no task split: the same pages serve both splits and the
    split picks MiniWoB's data mode (train/test problem distributions where a page has them)."""
    root = html_dir()
    mode = split or "test"
    tasks = []
    for page in sorted((root / "miniwob").glob("*.html")):
        tasks.append(Task(task_id=page.stem, env="gui", split=mode, tags=("miniwob",),
                          instruction=f"MiniWoB++ {page.stem} (the goal is generated per episode)",
                          data={"suite": "miniwob", "path": f"miniwob/{page.name}", "flight": False}))
    for site in sorted(p for p in (root / "flight").iterdir() if (p / "wrapper.html").exists()):
        tasks.append(Task(task_id=f"flight.{site.name}", env="gui", split=mode, tags=("miniwob", "flight"),
                          instruction=f"FlightWoB {site.name} (the goal is generated per episode)",
                          data={"suite": "miniwob", "path": f"flight/{site.name}/wrapper.html", "flight": True}))
    return tasks


def window_and_clip(task: Task) -> tuple[tuple[int, int], dict]:
    w, h = FLIGHT_WINDOW if task.data["flight"] else WINDOW
    cw, ch = FLIGHT_TASK_AREA if task.data["flight"] else TASK_AREA
    return (w, h), {"x": 0, "y": 0, "width": cw, "height": ch}


def is_success(raw_reward: float) -> bool:
    return raw_reward >= 1.0 - 1e-9
