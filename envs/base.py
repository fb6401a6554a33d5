"""The contract between an env and the harness, beyond Gymnasium's reset/step."""
from __future__ import annotations

from typing import Any, Callable, Protocol, TypeVar

import gymnasium as gym

from envs.spaces import FreeText
from nextstate.config import conf_defaults
from nextstate.types import Task

C = TypeVar("C")


class TextEnv(gym.Env[str, str]):
    """What every NextState env shares: text observations and actions, no render modes, and whether a
    reset seed changes an episode (see `NextStateEnv.seed_shapes_episodes`)."""

    metadata = {"render_modes": []}
    seed_shapes_episodes = False
    # what of an episode's last info its trajectory keeps (agents/rollout.py): the grader's report and
    # what the agent changed of the grading toolchain (envs/sandbox/integrity.py); an env adds its own
    final_info_kept: tuple[str, ...] = ("test_output", "test_exit_code", "tampered", "verifier_timed_out",
                                        "regraded", "suspicious")


def given_or_default(name: str, cls: type[C], config: C | None, sandbox=None):
    """(config, sandbox config): the ones given, else the values in conf/env/<name>.yaml and
    conf/sandbox/default.yaml, so `gymnasium.make("nextstate/X-v0")` with no arguments works."""
    from envs.sandbox import SandboxConfig

    return (config if config is not None else conf_defaults("env", name, cls),
            sandbox if sandbox is not None else conf_defaults("sandbox", "default", SandboxConfig))


class TaskImages:
    """For envs that run each task in its own Docker image: a client made on first use, and `prepare`,
    which builds every image up front (tagged by content hash, so a second run builds nothing)."""

    _client = None

    def image_for(self, task: Task) -> str:
        raise NotImplementedError

    def _docker(self):
        if self._client is None:
            from envs.sandbox import docker_client

            self._client = docker_client()
        return self._client

    def prepare(self, tasks: list[Task] | None = None, progress: Callable[[Task], None] | None = None) -> None:
        for task in tasks or self.tasks:
            self.image_for(task)
            if progress is not None:
                progress(task)


def set_tasks(env, tasks: list[Task], none_found: str) -> None:
    """Give an env its tasks, their index by id (for `pick_task`) and text spaces; no tasks at all is a
    ValueError saying `none_found` (where the env looked), not an env that fails at its first reset."""
    if not tasks:
        raise ValueError(none_found)
    env.tasks, env._by_id = tasks, {t.task_id: t for t in tasks}
    env.observation_space, env.action_space = FreeText(), FreeText()


def pick_task(env, options: dict | None, what: str) -> Task:
    """The task `reset(options={"task_id": ...})` names (a KeyError naming `what` if unknown), else one
    drawn with the env's seeded generator. `env` has `tasks`, `_by_id` and gymnasium's `np_random`."""
    if options and "task_id" in options:
        task = env._by_id.get(options["task_id"])
        if task is None:
            raise KeyError(f"unknown {what} {options['task_id']!r}")
        return task
    return env.tasks[int(env.np_random.integers(len(env.tasks)))]


class NextStateEnv(Protocol):
    """`step(action: str)` returns `info["next_state"]` (a `NextState`) on every step, and on the
    last step `info["outcome"]`, `info["success"]`; infra trouble sets `info["infra_failure"]` and
    `info["infra_reason"]` and ends the episode (never scored as 0). `info["step_label"]`, where the
    env can check a step (a call matching the reference, a command's exit code), is a dict of bools."""

    tasks: list[Task]
    seed_shapes_episodes: bool
    """Whether `reset(seed=...)` changes what an episode of a task is (MiniWoB's random pages do).
    Where it does not, a greedy evaluation is the same for every seed and is cached once."""

    def reference_actions(self, task: Task) -> list[str]:
        """The replies an oracle sends to solve `task` through the env's own action path."""

    def tools_for(self, task: Task) -> list[dict[str, Any]] | None:
        """Tool schemas the policy's chat template receives (`tools=`), or None."""

    def finalize(self) -> tuple[float, dict]:
        """Grade the episode now (a limit cut it); returns (outcome, info). Idempotent."""

    def prepare(self, tasks: list[Task], progress: Callable[[Task], None] | None = None) -> None:
        """Optional: build what episodes need (images) ahead of the run."""
