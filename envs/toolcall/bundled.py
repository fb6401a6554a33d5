"""The bundled tool-call suite: original multi-step tasks over stateful tools (envs/toolcall_tools).

A task is one YAML file in envs/tasks/toolcall/ (see its README): the request, the toolsets it may
use, optional setup SQL, the reference call sequence (one list of calls per reply) with the final
answer, and the checks that grade it: SQL queries on the final state with their expected rows, and
phrases the final answer must contain. Outcome 1 when every check passes, else 0.
"""
from __future__ import annotations

import json
import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from envs.task_formats import TaskFormatError
from envs.toolcall.episode import NOT_RUN, ParsingEpisode, ReplyCaps, Turn, call_key, capped_turn, end_turn, error_turn
from envs.toolcall.parse import ToolCall, render_calls, render_tool_responses
from envs.toolcall.tools import Tool, ToolContext, ToolError, fresh_db, toolsets
from envs.toolcall.validate import check_calls
from nextstate.types import NextState, Task

_REQUIRED = ("id", "split", "toolsets", "question", "reference", "answer", "checks")


def load_task(path: Path) -> Task:
    try:
        d = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise TaskFormatError(f"{path}: invalid YAML: {e}") from e
    missing = [k for k in _REQUIRED if k not in (d or {})]
    if missing:
        raise TaskFormatError(f"{path}: missing {missing}")
    if d["id"] != path.stem:
        raise TaskFormatError(f"{path}: id {d['id']!r} must match the file name")
    unknown = set(d["toolsets"]) - set(toolsets())
    if unknown:
        raise TaskFormatError(f"{path}: unknown toolsets {sorted(unknown)}")
    reference = [[ToolCall(c["name"], c.get("arguments") or {}) for c in step] for step in d["reference"]]
    for check in d["checks"]:
        if not ({"sql", "expect"} <= set(check) or "answer_contains" in check):
            raise TaskFormatError(f"{path}: a check needs sql+expect or answer_contains: {check}")
    return Task(task_id=d["id"], env="toolcall", instruction=d["question"].strip(), split=d["split"],
                difficulty=str(d.get("difficulty", "medium")), tags=("bundled", *d["toolsets"]), path=path,
                data={"kind": "bundled", "toolsets": tuple(d["toolsets"]),
                      "setup_sql": tuple(d.get("setup_sql") or ()), "reference": reference,
                      "answer": str(d["answer"]), "checks": d["checks"]})


def load_bundled(root: Path, split: str | None = None) -> list[Task]:
    if not root.is_dir():
        raise TaskFormatError(f"bundled tool-call suite {root} does not exist")
    tasks = [load_task(p) for p in sorted(root.glob("*.yaml"))]
    return [t for t in tasks if split in (None, "all") or t.split == split]


def task_tools(task: Task) -> dict[str, Tool]:
    sets = toolsets()
    return {t.name: t for name in task.data["toolsets"] for t in sets[name]}


def tools_for(task: Task) -> list[dict[str, Any]]:
    return [t.schema() for t in task_tools(task).values()]


def reference_actions(task: Task) -> list[str]:
    return [render_calls(step) for step in task.data["reference"]] + [task.data["answer"]]


def _rows_equal(got: list[tuple], expect: list[list]) -> bool:
    def norm(v):
        return round(float(v), 6) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
    return [[norm(v) for v in row] for row in got] == [[norm(v) for v in row] for row in expect]


def _answer_has(answer: str, item: str | list[str]) -> bool:
    text = " ".join(answer.lower().split())
    return any(" ".join(alt.lower().split()) in text for alt in ([item] if isinstance(item, str) else item))


def start_episode(task: Task, env) -> "BundledEpisode":
    python = env.python_runner() if "python" in task.data["toolsets"] else None
    return BundledEpisode(task, python, env.config.obs_max_chars, ReplyCaps.of(env.config))


class BundledEpisode(ParsingEpisode):
    def __init__(self, task: Task, python_runner, obs_max_chars: int, caps: ReplyCaps):
        super().__init__(task, obs_max_chars, caps)
        self.tools = task_tools(task)
        self.specs = {name: t.spec() for name, t in self.tools.items()}
        if python_runner is not None and "python" in task.data["toolsets"]:
            python_runner.new_episode()
        else:
            python_runner = None
        self.ctx = ToolContext(fresh_db(task.data["setup_sql"]), python_runner)
        self.reference = Counter(call_key(c) for step in task.data["reference"] for c in step)
        self.answer: str | None = None

    def _invoke(self, call: ToolCall) -> Any:
        tool = self.tools[call.name]
        for arg, value in call.arguments.items():
            enum = tool.params[arg].enum
            if enum and value not in enum:
                raise ToolError(f"{call.name}: {arg} must be one of {list(enum)}, got {value!r}")
        return tool.fn(self.ctx, **call.arguments)

    def on_calls(self, reply) -> Turn:
        canon, problem = check_calls(reply.calls, self.specs)
        if problem:
            return error_turn(problem, label=NOT_RUN)
        blocks, errors, bugs, size, stopped = [], 0, [], 0, None
        t0 = time.monotonic()
        self.ctx.deadline, self.ctx.reply_tool_s = t0 + self.caps.max_tool_s, self.caps.max_tool_s
        for call in canon:
            if blocks and time.monotonic() - t0 >= self.caps.max_tool_s:
                stopped = f"the reply's tool calls took more than {self.caps.max_tool_s:g} s, the limit per reply"
                break
            try:
                out = self._invoke(call)
            except ToolError as e:
                out, errors = {"error": str(e)}, errors + 1
            except (TypeError, ValueError, sqlite3.Error) as e:  # a tool bug: reported, never raised
                out, errors = {"error": f"{call.name} failed: {e}"}, errors + 1
                bugs.append(f"{call.name}: {type(e).__name__}: {e}")
            blocks.append(render_tool_responses([json.dumps(out, ensure_ascii=False)], self.obs_max_chars))
            size += len(blocks[-1].encode("utf-8")) + 1
            if size > self.caps.max_obs_bytes:
                stopped = self.caps.too_many_bytes()
                break
        ran = canon[:len(blocks)]
        fields = {"calls": [c.name for c in ran], "errors": errors, **({"tool_bugs": bugs} if bugs else {})}
        if stopped:
            return capped_turn(blocks, len(canon), stopped, self.caps,
                               {**fields, "not_run": [c.name for c in canon[len(ran):]]})
        text = "\n".join(blocks)
        ns = NextState(kind="tool", text=text, fields=fields)
        label = {"well_formed": True, "executed_ok": errors == 0,
                 "matches_reference": all(call_key(c) in self.reference for c in canon)}
        return Turn(ns, text, step_label=label)

    def on_text(self, text: str) -> Turn:
        self.answer = text
        return end_turn()

    def on_malformed(self, reason: str) -> Turn:
        return error_turn(reason, label=NOT_RUN)

    def grade(self) -> tuple[float, dict]:
        results = []
        for check in self.task.data["checks"]:
            if "sql" in check:
                got = self.ctx.db.execute(check["sql"]).fetchall()
                results.append({"check": check["sql"], "passed": _rows_equal(got, check["expect"]),
                                "got": [list(r) for r in got], "expect": check["expect"]})
            else:
                answer = self.answer or ""
                missing = [i for i in check["answer_contains"] if not _answer_has(answer, i)]
                results.append({"check": f"answer contains {check['answer_contains']}", "passed": not missing,
                                "missing": missing})
        outcome = float(all(r["passed"] for r in results))
        failed = [r for r in results if not r["passed"]]
        report = "all checks passed" if not failed else "failed: " + "; ".join(
            f"{r['check']} (got {r.get('got', self.answer)!r})" for r in failed)
        return outcome, {"checks": results, "test_output": report}

    def close(self) -> None:
        self.ctx.db.close()
