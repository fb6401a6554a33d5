"""Errors that mean the infrastructure failed, not the agent: they are never scored as reward 0."""


class SandboxError(RuntimeError):
    """Docker trouble: the daemon is gone, the container died, an image could not be built."""
