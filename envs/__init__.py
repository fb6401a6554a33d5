"""NextState environments. Importing this package (or `nextstate`) registers them with Gymnasium under
versioned ids with lazy entry points: nothing heavy is imported until `gym.make`. The table of env
kinds is `nextstate.registry.ENVS`.

Every env class offers, besides the Gymnasium API (see envs/base.py): `tasks`,
`reference_actions(task)`, `tools_for(task)`, `finalize()`, and optionally `prepare(tasks, progress)`.
"""
from __future__ import annotations

from nextstate.registry import ENVS, EnvSpec, register_all

__all__ = ["ENVS", "EnvSpec"]

register_all()
