"""`nextstate/Terminal-v0`: a task in a Docker sandbox, driven through a persistent shell.

Observation: text (the instruction, then each command's next state). Action: the agent's reply
(see `terminal_actions`). After the agent says DONE (or a limit cuts in), the task's tests are copied
in — the agent never sees them — and run as root; the outcome (1/0, or Harbor's reward) is the last
step's reward. Docker trouble ends the episode as an infra failure, never as reward 0.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from envs.base import TextEnv, given_or_default, pick_task, set_tasks
from envs.sandbox import SandboxConfig, SandboxError
from envs.sandbox.images import build_image, ensure_shared_image
from envs.sandbox.integrity import tampering
from envs.sandboxed import SandboxedEpisodes, render_next_state
from envs.task_formats import load_suite
from envs.terminal.actions import parse_action
from nextstate.config import REPO_ROOT, EnvConfig
from nextstate.types import NextState, Task

_NOT_IN_IMAGE = {"tests", "solution", "solution.sh", "run-tests.sh", "task.yaml", "task.toml",
                 "instruction.md"}


@dataclass
class TerminalEnvConfig(EnvConfig):
    suite: str
    tasks_dir: str
    shared_image: str
    base_image: str
    image_map: dict[str, str]
    user: str
    obs_max_chars: int
    done_token: str


class TerminalEnv(SandboxedEpisodes, TextEnv):
    def __init__(self, config: TerminalEnvConfig | None = None, sandbox: SandboxConfig | None = None,
                 *, tasks: list[Task] | None = None, split: str | None = None, run_id: str = "adhoc"):
        config, sandbox = given_or_default("terminal", TerminalEnvConfig, config, sandbox)
        self.config, self.sandbox_config, self.run_id = config, sandbox, run_id
        tasks_dir = Path(config.tasks_dir)
        found = tasks if tasks is not None else load_suite(
            tasks_dir if tasks_dir.is_absolute() else REPO_ROOT / tasks_dir, env="terminal", split=split)
        set_tasks(self, found, f"no terminal tasks in {config.tasks_dir} (split={split})")
        self._client = None
        self._images: dict[str, str] = {}
        self.task: Task | None = None
        self._graded = False

    # -- images -----------------------------------------------------------------------------------
    def image_for(self, task: Task) -> str:
        if task.task_id not in self._images:
            client = self._docker()
            ensure_shared_image(client, self.config.shared_image, self.config.base_image)
            self._images[task.task_id] = build_image(
                client, Path(task.data["build_context"]), f"nextstate-task/{task.task_id}",
                dockerfile=task.data["dockerfile"], image_map=self.config.image_map, exclude=_NOT_IN_IMAGE)
        return self._images[task.task_id]

    # -- gymnasium API ----------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._close_sandbox()
        self.task = pick_task(self, options, "terminal task")
        t0 = time.monotonic()
        user = self.task.data.get("run_as") or self.config.user
        info = {"task_id": self.task.task_id, "user": user}
        self._start_sandbox(self.task, user, info)
        self._graded = False
        info["setup_s"] = time.monotonic() - t0
        obs = f"{self.task.instruction}\n\nYou are user `{user}` in {self.sandbox_config.workdir}."
        return obs, info

    def step(self, action: str):
        if self.task is None:
            raise RuntimeError("call reset() before step()")
        if self._sandbox is None:
            return self._infra_failure("the sandbox is not running (it failed at reset)")
        parsed = parse_action(action, self.config.done_token)
        if parsed.error:
            ns = NextState(kind="error", text=parsed.error)
            info = {"next_state": ns, "step_label": {"parsed": False}}
            return render_next_state(ns, self.config.obs_max_chars), 0.0, False, False, info
        info: dict = {}
        if parsed.command:
            try:
                r = self._sandbox.exec(parsed.command)
            except SandboxError as e:
                return self._infra_failure(str(e))
            ns = NextState(kind="terminal", text=r.output, exit_code=r.exit_code, cwd=r.cwd,
                           timed_out=r.timed_out, truncated_bytes=r.truncated_bytes,
                           fields={"shell_restarted": r.restarted})
            # A verifiable step label: did the command itself succeed?
            info["step_label"] = {"parsed": True, "exit_ok": r.exit_code == 0}
        else:
            ns = NextState(kind="terminal", text="(finished)", exit_code=None, cwd=None)
        info["next_state"] = ns
        obs = render_next_state(ns, self.config.obs_max_chars)
        if not parsed.done:
            return obs, 0.0, False, False, info
        outcome, final = self.finalize()
        info.update(final)
        return obs, outcome, True, False, info

    def finalize(self) -> tuple[float, dict]:
        """Grade the task once: copy the tests in after the agent is done, run them as root.

        Nothing the agent left may take part in its grading:
        - A root agent's processes are all killed first (`Sandbox.kill_all_processes`): a loop it
          double-forked away from its shell could rewrite the tests while they are copied in and
          run. A non-root agent's processes keep running, because a task may check a service the
          agent started (start-background-worker does); they cannot touch what grading runs: the
          tests arrive owned by root in a root-owned directory, and run with the interpreter's
          root-owned files only (below).
        - /tests and /logs/verifier are removed before the tests arrive, so that a root agent's
          /tests/conftest.py or a reward.txt written in advance cannot join them.
        - The tests run with /tests as their cwd, not the agent's /app: `python3 -m pytest` puts the
          cwd first on sys.path, so an /app/pytest.py would have been the test runner. The bundled
          run-tests.sh scripts also call `python3 -I` (no cwd, script dir, PYTHON* variables or
          user site on sys.path).
        - The interpreter, pytest, the shell and the libraries the tests run with are the
          container's: a root agent could have rewritten them. Docker's own list of what changed
          against the image is checked first (envs/sandbox/integrity.py); a touched grading
          toolchain scores 0, naming the paths, and the tests never run. For a root agent it is
          checked before the kill (which runs the container's bash) and again after it (a process
          alive until the kill could have changed something meanwhile).
        """
        if self._graded or self._sandbox is None:
            return 0.0, {}
        self._graded = True
        t0 = time.monotonic()
        task, sb = self.task, self._sandbox
        clean = "rm -rf /tests /logs/verifier"
        try:
            tampered = self._toolchain_tampering(sb)
            if not tampered and (task.data.get("run_as") or self.config.user) == "root":
                sb.kill_all_processes(then=clean)
                tampered = self._toolchain_tampering(sb)
            elif not tampered:
                sb.run(clean)
            if tampered:
                return 0.0, {"outcome": 0.0, "success": False, "tampered": tampered,
                             "test_output": "not graded: the agent changed the grading toolchain: "
                                            + "; ".join(tampered[:20]), "verify_s": time.monotonic() - t0}
            sb.upload(task.data["tests_dir"], "/")  # -> /tests
            if task.data["format"] == "harbor":
                code, out = sb.run("mkdir -p /logs/verifier && bash /tests/test.sh", workdir="/tests",
                                   timeout=task.data["test_timeout_s"])
                try:
                    outcome = float(sb.download("/logs/verifier/reward.txt").decode().strip() or 0)
                except (FileNotFoundError, ValueError):
                    outcome = 0.0
            else:
                sb.upload(task.data["test_entry"], "/tests")
                code, out = sb.run("bash /tests/run-tests.sh", workdir="/tests",
                                   timeout=task.data["test_timeout_s"], environment={"TEST_DIR": "/tests"})
                outcome = 1.0 if code == 0 else 0.0
        except SandboxError as e:
            self._close_sandbox()
            return 0.0, {"infra_failure": True, "infra_reason": str(e)}
        return outcome, {"outcome": outcome, "success": outcome >= 1.0, "test_exit_code": code,
                         "test_output": out[-4000:], "verify_s": time.monotonic() - t0}

    @staticmethod
    def _toolchain_tampering(sb) -> list[str]:
        return tampering(sb.changes(), sb.is_dir, sb.download)

    def reference_actions(self, task: Task) -> list[str]:
        """The task's reference solution, as the replies an agent would send."""
        sol = task.data.get("solution")
        if not sol:
            return [self.config.done_token]
        script = Path(sol).read_text()
        return [f"```bash\nbash -s <<'__NS_SOLUTION__'\n{script}\n__NS_SOLUTION__\n```",
                self.config.done_token]

    def tools_for(self, task: Task) -> None:
        return None  # terminal agents act through text, not tool schemas
