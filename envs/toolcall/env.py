"""`nextstate/ToolCall-v0`: an agent calls tools; every tool result (or error) is its next state.

Action: the agent's reply, with calls as `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`
(several = parallel calls); a reply without a call is a message or the final answer and ends the
episode (in BFCL multi-turn entries, the user's turn). Observation: the request, then the tool results
in `<tool_response>` blocks, `[error] ...` for a reply that could not be carried out, or the user's
next request. Tools reach the policy through `tools_for(task)` (the chat template's `tools=`).

Suites (`env.suite=`, joined with `+` to mix): `bundled` (original stateful tasks, envs/tasks/toolcall),
`templated` (short requests over three small tools, drawn from seeds: envs/toolcall/templated.py),
`bfcl_<category>` (e.g. bfcl_simple_python, bfcl_multi_turn_base), `bfcl_all`. The outcome (1/0) is
the last step's reward; `info["step_label"]` carries what can be checked per step: `well_formed` (the
reply parsed and fits the tool schemas), `executed_ok` (no tool returned an error; not for BFCL
single-turn, where nothing runs), `matches_reference` (every call is in the ground truth of that turn;
for BFCL single-turn, the checker's verdict).

A malformed reply, an unknown tool, unknown/missing arguments or wrong argument types become an error
next state (kind "error") and the episode goes on, except in BFCL single-turn entries, where the
first reply is the graded answer (and in BFCL multi-turn, where argument types are left to
bfcl-eval's API classes, as its own ground truth needs). One reply may cost only so much: at most
`max_calls_per_reply` calls, `max_reply_obs_bytes` of tool results and `max_reply_tool_s` of tool
time (episode.py `ReplyCaps`); past a cap the agent gets an error next state, as for a malformed
reply. Docker trouble (python tool) ends the episode as an infra failure, never a zero.
"""
from __future__ import annotations

import importlib
import time
from dataclasses import dataclass
from pathlib import Path

from envs.base import TextEnv, given_or_default, pick_task, set_tasks
from envs.sandbox import Sandbox, SandboxConfig, docker_client
from envs.sandbox.images import ensure_shared_image
from envs.toolcall.episode import Episode, InfraFailure
from nextstate.config import REPO_ROOT, EnvConfig
from nextstate.types import NextState, Task

# task.data["kind"] -> the module that runs it (imported on first use: BFCL stays out of bundled runs);
# each offers start_episode(task, env), reference_actions(task) and tools_for(task)
_KINDS = {"bundled": "envs.toolcall.bundled", "templated": "envs.toolcall.templated",
          "bfcl_single": "envs.toolcall.bfcl.single", "bfcl_multi": "envs.toolcall.bfcl.multi"}


@dataclass
class ToolCallEnvConfig(EnvConfig):
    suite: str
    tasks_dir: str
    shared_image: str
    base_image: str
    user: str
    python_timeout_s: float
    obs_max_chars: int
    max_calls_per_reply: int  # the caps on one reply (envs/toolcall/episode.py ReplyCaps)
    max_reply_obs_bytes: int
    max_reply_tool_s: float
    bfcl_checker_model: str
    bfcl_test_fraction: float
    bfcl_max_steps_per_turn: int
    templated_train: int  # the templated suite's instances per split, drawn with templated_seed
    templated_test: int
    templated_seed: int


def load_tasks(config: ToolCallEnvConfig, split: str | None) -> list[Task]:
    from envs.toolcall.bfcl.suite import MULTI_TURN, SINGLE_TURN, load_bfcl
    from envs.toolcall.bundled import load_bundled

    tasks: list[Task] = []
    for part in config.suite.split("+"):
        if part == "bundled":
            root = Path(config.tasks_dir)
            tasks += load_bundled(root if root.is_absolute() else REPO_ROOT / root, split)
        elif part == "templated":
            from envs.toolcall.templated import load_templated

            tasks += load_templated(split, config.templated_train, config.templated_test, config.templated_seed)
        elif part == "bfcl_all":
            for category in SINGLE_TURN + MULTI_TURN:
                tasks += load_bfcl(category, split, config.bfcl_test_fraction)
        elif part.startswith("bfcl_"):
            tasks += load_bfcl(part[len("bfcl_"):], split, config.bfcl_test_fraction)
        else:
            raise ValueError(f"unknown tool-call suite {part!r}: use bundled, templated, bfcl_<category> or bfcl_all")
    return tasks


def _module(task: Task):
    return importlib.import_module(_KINDS[task.data["kind"]])


class ToolCallEnv(TextEnv):
    def __init__(self, config: ToolCallEnvConfig | None = None, sandbox: SandboxConfig | None = None,
                 *, tasks: list[Task] | None = None, split: str | None = None, run_id: str = "adhoc"):
        config, sandbox = given_or_default("toolcall", ToolCallEnvConfig, config, sandbox)
        self.config, self.sandbox_config, self.run_id = config, sandbox, run_id
        set_tasks(self, tasks if tasks is not None else load_tasks(config, split),
                  f"no tool-call tasks in suite {config.suite!r} (split={split})")
        self._client = None
        self._python = None
        self._episode: Episode | None = None
        self.task: Task | None = None
        self._graded = False

    # -- what runs an episode ---------------------------------------------------------------------
    def python_runner(self):
        """The python tool's sandbox, shared by every episode of this env (started on first call)."""
        if self._python is None:
            from envs.toolcall.tools.python import PythonRunner

            self._python = PythonRunner(self._start_sandbox, self.config.python_timeout_s,
                                        self.config.obs_max_chars)
        return self._python

    def _start_sandbox(self) -> Sandbox:
        if self._client is None:
            self._client = docker_client()
        image = ensure_shared_image(self._client, self.config.shared_image, self.config.base_image)
        sb = Sandbox(image, self.sandbox_config, run_id=self.run_id, client=self._client, user=self.config.user,
                     scratch=("/tmp", "/var/tmp", "/home"))  # size-limited (sandbox.disk_limit)
        sb.start()
        return sb

    def prepare(self, tasks: list[Task] | None = None, progress=None) -> None:
        """Pay one-off costs before the clock starts: the python sandbox's image (built or found by
        content hash), and bfcl-eval's slow checker import."""
        tasks = tasks or self.tasks
        if any(t.data["kind"] == "bundled" and "python" in t.data["toolsets"] for t in tasks):
            if self._client is None:
                self._client = docker_client()
            ensure_shared_image(self._client, self.config.shared_image, self.config.base_image)
        if any(t.data["kind"] == "bfcl_single" for t in tasks):
            from envs.toolcall.bfcl.check import checker_module

            checker_module()
        if progress is not None:
            for t in tasks:
                progress(t)

    # -- gymnasium API ----------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        task = pick_task(self, options, "tool-call task")
        self._close_episode()
        self.task = task
        t0 = time.monotonic()
        self._episode = _module(task).start_episode(task, self)
        self._graded = False
        return self._episode.first_observation(), {"task_id": task.task_id, "suite": self.config.suite,
                                                   "setup_s": time.monotonic() - t0}

    def step(self, action: str):
        if self._episode is None:
            raise RuntimeError("call reset() before step()")
        try:
            turn = self._episode.act(action)
        except InfraFailure as e:
            return self._infra_failure(str(e))
        info: dict = {"next_state": turn.next_state}
        if turn.step_label is not None:
            info["step_label"] = turn.step_label
        if not turn.done:
            return turn.obs, 0.0, False, False, info
        outcome, final = self.finalize()
        info.update(final)
        return turn.obs, outcome, True, False, info

    def finalize(self) -> tuple[float, dict]:
        """Grade the episode once, with the suite's own checker."""
        if self._graded or self._episode is None:
            return 0.0, {}
        self._graded = True
        # Grading takes microseconds to a millisecond, so no verify_s: a timing in the last step's info
        # would also break check_env's "same seed and action, same info".
        outcome, info = self._episode.grade()
        return outcome, {**info, "outcome": outcome, "success": outcome >= 1.0}

    def reference_actions(self, task: Task) -> list[str]:
        return _module(task).reference_actions(task)

    def tools_for(self, task: Task) -> list[dict]:
        return _module(task).tools_for(task)

    def close(self):
        self._close_episode()
        if self._python is not None:
            self._python.close()
            self._python = None
        super().close()

    # -- helpers ----------------------------------------------------------------------------------
    def _close_episode(self) -> None:
        if self._episode is not None:
            self._episode.close()
            self._episode = None

    def _infra_failure(self, reason: str):
        self._graded = True
        ns = NextState(kind="error", text=f"infrastructure failure: {reason}")
        return f"[error] {ns.text}", 0.0, True, False, {"next_state": ns, "infra_failure": True,
                                                        "infra_reason": reason}
