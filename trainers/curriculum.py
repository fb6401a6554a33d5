"""Curriculum knobs the method's users asked for: episodes allowed more steps as training goes on,
and training tasks filtered by difficulty or tag. Pure functions; the values live in conf/mode/."""
from __future__ import annotations

from nextstate.types import Task


def max_steps_at(iteration: int, iterations: int, start: int | None, end: int) -> int:
    """Linear growth from `start` (first iteration) to `end` (last); `start=None` = no curriculum."""
    if start is None or iterations <= 1:
        return end
    frac = iteration / (iterations - 1)
    return max(1, round(start + (end - start) * frac))


def without_tags(tasks: list[Task], exclude: list[str] | None) -> list[Task]:
    """The suite less every task that carries any of `exclude` (the top-level `exclude_tags`: it
    narrows eval, training and SFT alike, e.g. to the tool-call tasks with short tool schemas)."""
    return [t for t in tasks if not exclude or not set(exclude) & set(t.tags)]


def filter_tasks(tasks: list[Task], difficulties: list[str] | None, tags: list[str] | None) -> list[Task]:
    """Tasks of the given difficulties that carry any of the given tags (None = no filter)."""
    out = [t for t in tasks if not difficulties or t.difficulty in difficulties]
    return [t for t in out if not tags or set(tags) & set(t.tags)]
