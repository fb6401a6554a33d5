"""NextState environments. Importing this package registers them with Gymnasium under versioned
ids with lazy entry points: nothing heavy is imported until `gym.make`.

Every env class offers, besides the Gymnasium API (see envs/base.py): `tasks`,
`reference_actions(task)`, `tools_for(task)`, `finalize()`, and optionally `prepare(tasks, progress)`.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass

import gymnasium as gym


@dataclass(frozen=True)
class EnvSpec:
    """A registered env kind: its Gymnasium id and the classes in `envs/<name>/env.py`."""

    name: str
    env_id: str
    env_class: str
    config_class_name: str

    @property
    def entry_point(self) -> str:
        return f"envs.{self.name}.env:{self.env_class}"

    def config_class(self):
        return getattr(importlib.import_module(f"envs.{self.name}.env"), self.config_class_name)


# A new env kind: its folder envs/<name>/ (env.py), its conf/env/<name>.yaml, and one line here.
ENVS: dict[str, EnvSpec] = {spec.name: spec for spec in [
    EnvSpec("terminal", "nextstate/Terminal-v0", "TerminalEnv", "TerminalEnvConfig"),
    EnvSpec("gui", "nextstate/GUI-v0", "GUIEnv", "GUIEnvConfig"),
    EnvSpec("toolcall", "nextstate/ToolCall-v0", "ToolCallEnv", "ToolCallEnvConfig"),
    EnvSpec("swe", "nextstate/SWE-v0", "SWEEnv", "SWEEnvConfig"),
    EnvSpec("chat", "nextstate/Chat-v0", "ChatEnv", "ChatEnvConfig"),
]}

for _spec in ENVS.values():
    if _spec.env_id not in gym.registry:
        gym.register(id=_spec.env_id, entry_point=_spec.entry_point)
