"""Errors that mean the infrastructure failed, not the agent: they are never scored as reward 0."""


class SandboxError(RuntimeError):
    """Docker trouble: the daemon is gone, the container died, an image could not be built."""


class SandboxFullError(SandboxError):
    """A copy into a live container met its disk ceiling (envs/sandbox/quota.py). The agent filled
    that disk, so what could not be copied (the tests) fails the agent's episode, not the harness."""
