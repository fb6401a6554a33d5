"""The stateful tools of the bundled tool-call suite.

Every toolset is a list of `Tool`s over one per-episode SQLite database (store, calendar, notes) or
the Docker sandbox (python). A tool is a plain function `fn(ctx, **arguments)` plus the schema the
policy sees; a refusal the agent should read (unknown id, not enough stock) is a `ToolError`, shown to
it as `{"error": ...}`. The seed data every episode starts from is `seed.sql`.
"""
from __future__ import annotations

import functools
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from envs.toolcall.validate import ToolSpec

SEED_SQL = Path(__file__).with_name("seed.sql")
TODAY = "2025-06-01"  # the suite's fixed "today": dates in answers and new rows are deterministic


class ToolError(Exception):
    """The tool refused the call; the message is what the agent reads."""


@dataclass(frozen=True)
class Param:
    type: str  # JSON-schema type
    description: str
    required: bool = True
    enum: tuple[str, ...] | None = None
    items: dict[str, Any] | None = None  # JSON schema of array items


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    params: dict[str, Param]
    fn: Callable[..., Any]

    def schema(self) -> dict[str, Any]:
        """OpenAI / Qwen function format, what a chat template's `tools=` takes."""
        props = {}
        for name, p in self.params.items():
            prop: dict[str, Any] = {"type": p.type, "description": p.description}
            if p.enum:
                prop["enum"] = list(p.enum)
            if p.items:
                prop["items"] = p.items
            props[name] = prop
        return {"type": "function", "function": {
            "name": self.name, "description": self.description,
            "parameters": {"type": "object", "properties": props,
                           "required": [n for n, p in self.params.items() if p.required]}}}

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, {n: p.type for n, p in self.params.items()},
                        frozenset(n for n, p in self.params.items() if p.required))


@dataclass
class ToolContext:
    """What tools act on during one episode."""

    db: sqlite3.Connection
    python: Any = None  # a PythonRunner, started on first use
    # the reply's tool time: when it runs out (time.monotonic()), and how much it was (max_reply_tool_s);
    # a slow tool's call gets no more than what is left
    deadline: float | None = None
    reply_tool_s: float | None = None


@functools.lru_cache(maxsize=1)
def _seed_sql() -> str:
    return SEED_SQL.read_text()


def fresh_db(setup_sql: list[str] | tuple[str, ...] = ()) -> sqlite3.Connection:
    """The seed state in memory (well under a millisecond), plus a task's own setup statements."""
    db = sqlite3.connect(":memory:", check_same_thread=False)  # one env per worker thread; closed by the main one
    db.executescript(_seed_sql())
    for stmt in setup_sql:
        db.execute(stmt)
    db.commit()
    return db


def toolsets() -> dict[str, list[Tool]]:
    from envs.toolcall.tools import calendar, notes, python, store

    return {"store": store.TOOLS, "calendar": calendar.TOOLS, "notes": notes.TOOLS, "python": python.TOOLS}
