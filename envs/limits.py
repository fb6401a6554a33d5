"""Episode limits as a Gymnasium wrapper: max steps and wall clock -> `truncated`.

When a limit cuts an episode, the env is still graded (`finalize()`), as Terminal-Bench grades a
task after the agent's time runs out: the work done so far counts."""
from __future__ import annotations

import time

import gymnasium as gym


class EpisodeLimits(gym.Wrapper):
    def __init__(self, env: gym.Env, max_steps: int | None = None, max_seconds: float | None = None):
        super().__init__(env)
        self.max_steps = max_steps
        self.max_seconds = max_seconds
        self._steps = 0
        self._t0 = 0.0

    def reset(self, **kwargs):
        self._steps, self._t0 = 0, time.monotonic()
        return self.env.reset(**kwargs)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._steps += 1
        over_steps = self.max_steps is not None and self._steps >= self.max_steps
        over_time = self.max_seconds is not None and time.monotonic() - self._t0 >= self.max_seconds
        if not terminated and (over_steps or over_time):
            truncated = True
            info = dict(info, truncated_by="max_steps" if over_steps else "wall_clock")
            finalize = getattr(self.env.unwrapped, "finalize", None)
            if finalize is not None:
                outcome, final_info = finalize()
                reward += outcome
                info.update(final_info)
        return obs, reward, terminated, truncated, info
