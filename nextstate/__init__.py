"""The ground layer: the seam types every package speaks (`types`), the typed config schemas
(`config`), atomic result files and the leaderboard row (`atomic`, `leaderboard`), and the table of env
kinds (`registry`). It imports nothing from the project, so envs, agents, trainers and the harness can
all stand on it. Importing it registers every env with Gymnasium:

    import gymnasium as gym
    import nextstate
    gym.register_envs(nextstate)
    env = gym.make("nextstate/Chat-v0")
"""
from nextstate.registry import register_all

register_all()
