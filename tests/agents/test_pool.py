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


def test_an_env_still_in_an_episode_when_the_pool_closes_is_closed_when_it_ends():
    """Ctrl-C / SIGTERM: the run closes the pool while worker threads are still in episodes (one may be
    starting a container). Each such env is closed again when its episode ends, and no env is made
    after the close, so a stopped run leaves no container behind."""
    import pytest

    cfg = conf_defaults("env", "toolcall", ToolCallEnvConfig)
    closes = []

    class Counts(Closes):
        def close(self):
            closes.append(self)
            super().close()

    pool = EnvPool(lambda: Counts(gym.make("nextstate/ToolCall-v0", config=cfg, split="test")))
    with pool.checkout() as env:
        pool.close()  # the run stops while this episode runs
        assert closes == [env]
    assert closes == [env, env]  # the episode's end closed it again, whatever it started meanwhile
    with pytest.raises(RuntimeError, match="closed"):
        with pool.checkout():
            pass
