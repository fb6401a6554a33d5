"""The env kinds NextState registers with Gymnasium, by name and entry point. It lives in the ground
layer so that `import nextstate` registers every env (Gymnasium's `gym.register_envs(nextstate)`
convention) without importing one: entry points are strings, resolved at `gym.make`."""
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


def register_all() -> None:
    for spec in ENVS.values():
        if spec.env_id not in gym.registry:
            gym.register(id=spec.env_id, entry_point=spec.entry_point)
