"""Envs whose episode runs in one container of its task's image (terminal, SWE).

The container starts at reset and goes at the next reset, at close, and on infrastructure trouble,
which ends the episode unscored (never a zero). A container that fails to start is reported in
reset's info; the first step then ends the episode as an infra failure.
"""
from __future__ import annotations

from envs.base import TaskImages
from envs.sandbox import Sandbox, SandboxError
from nextstate.types import NextState, Task


def render_next_state(ns: NextState, max_chars: int) -> str:
    """The next state as the agent reads it."""
    if ns.kind == "error":
        return f"[error] {ns.text}"
    text = ns.text
    if len(text) > max_chars:
        half = max_chars // 2
        text = f"{text[:half]}\n[... {len(text) - max_chars} characters cut ...]\n{text[-half:]}"
    head = f"[exit code {ns.exit_code}] [cwd {ns.cwd}]" + (" [timed out]" if ns.timed_out else "")
    return f"{head}\n{text}" if text.strip() else f"{head}\n(no output)"


class SandboxedEpisodes(TaskImages):
    """Needs `sandbox_config`, `run_id` and `config.obs_max_chars` from the env."""

    _sandbox: Sandbox | None = None

    def _start_sandbox(self, task: Task, user: str, info: dict) -> None:
        """The episode's container (reset has closed the last one)."""
        try:
            self._sandbox = Sandbox(self.image_for(task), self.sandbox_config, run_id=self.run_id,
                                    client=self._docker(), user=user)
            self._sandbox.start()
        except SandboxError as e:
            self._close_sandbox()
            info.update(infra_failure=True, infra_reason=str(e))

    def _close_sandbox(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None

    def _infra_failure(self, reason: str):
        """The step that ends an episode on infrastructure trouble."""
        self._close_sandbox()
        ns = NextState(kind="error", text=f"infrastructure failure: {reason}")
        info = {"next_state": ns, "infra_failure": True, "infra_reason": reason}
        return render_next_state(ns, self.config.obs_max_chars), 0.0, True, False, info

    def close(self):
        self._close_sandbox()
        super().close()
