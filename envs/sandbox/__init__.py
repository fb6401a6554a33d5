"""Docker sandboxes: containers with limits, a persistent shell, images built locally."""
from envs.sandbox.container import Sandbox, SandboxConfig, docker_client, wait_for_background_removals
from envs.sandbox.errors import SandboxError, SandboxFullError
from envs.sandbox.labels import reap_orphans
from envs.sandbox.shell import ShellResult

__all__ = ["Sandbox", "SandboxConfig", "SandboxError", "SandboxFullError", "ShellResult", "docker_client",
           "reap_orphans", "wait_for_background_removals"]
