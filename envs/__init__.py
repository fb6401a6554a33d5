"""NextState environments. Importing this package registers them with Gymnasium (lazy entry points:
nothing heavy is imported until `gym.make`)."""
import gymnasium as gym

_ENVS = {
    "nextstate/Terminal-v0": "envs.terminal:TerminalEnv",
}

for _id, _entry in _ENVS.items():
    if _id not in gym.registry:
        gym.register(id=_id, entry_point=_entry)
