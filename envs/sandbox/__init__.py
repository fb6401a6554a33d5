"""Docker sandboxes: containers with limits, a persistent shell, images built locally."""
from .container import Sandbox, SandboxConfig, docker_client, wait_for_background_removals
from .errors import SandboxError
from .labels import reap_orphans
from .shell import ShellResult

__all__ = ["Sandbox", "SandboxConfig", "SandboxError", "ShellResult", "docker_client",
           "reap_orphans", "wait_for_background_removals"]
