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
    env_id: str
    entry_point: str  # "module:Class"
    config: str  # "module:ConfigDataclass"

    def config_class(self):
        module, name = self.config.split(":")
        return getattr(importlib.import_module(module), name)


ENVS: dict[str, EnvSpec] = {
    "terminal": EnvSpec("nextstate/Terminal-v0", "envs.terminal:TerminalEnv", "envs.terminal:TerminalEnvConfig"),
    "gui": EnvSpec("nextstate/GUI-v0", "envs.gui:GUIEnv", "envs.gui:GUIEnvConfig"),
    "toolcall": EnvSpec("nextstate/ToolCall-v0", "envs.toolcall:ToolCallEnv", "envs.toolcall:ToolCallEnvConfig"),
    "swe": EnvSpec("nextstate/SWE-v0", "envs.swe:SWEEnv", "envs.swe:SWEEnvConfig"),
    "chat": EnvSpec("nextstate/Chat-v0", "envs.chat:ChatEnv", "envs.chat:ChatEnvConfig"),
}

for _spec in ENVS.values():
    if _spec.env_id not in gym.registry:
        gym.register(id=_spec.env_id, entry_point=_spec.entry_point)
