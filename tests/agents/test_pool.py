"""Many episodes at once (agents.pool): envs are made when needed and reused by every later batch, so
a long run holds as many envs (each a Docker client, and a container while an episode runs) as it
runs episodes at once, not one set per batch."""
import gymnasium as gym

import nextstate  # noqa: F401  (registers the envs)
from agents.base import OracleAgent
from agents.pool import EnvPool, run_episodes
from envs.toolcall.env import ToolCallEnvConfig
from nextstate.config import conf_defaults


class Closes(gym.Wrapper):
    def close(self):
        self.closed = True
        super().close()


def test_batches_reuse_the_pools_envs_and_close_them_all():
    cfg = conf_defaults("env", "toolcall", ToolCallEnvConfig)
    made = []

    def make():
        made.append(Closes(gym.make("nextstate/ToolCall-v0", config=cfg, split="test")))
        return made[-1]

    pool = EnvPool(make)
    tasks = pool.get().unwrapped.tasks[:6]
    for _ in range(4):  # a training run: a batch of rollouts per iteration, each in new worker threads
        trajs = run_episodes(pool, lambda i: OracleAgent(), tasks, system_prompt="", seed=0, parallel=3,
                             progress=False)
        assert all(t.success for t in trajs), [t.infra_reason for t in trajs]
    assert 1 <= len(made) <= 3  # at most one per episode in flight, whatever the number of batches
    pool.close()
    assert all(getattr(env, "closed", False) for env in made)
