"""A second Docker daemon on a btrfs data root, beside the default one: where the disk ceiling's
test and benchmark run (a user opts the default daemon in with `NEXTSTATE_DOCKER_BTRFS=1`)."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors

from envs.sandbox.errors import SandboxError

_ENSURE = Path(__file__).resolve().parents[2] / "scripts" / "ensure_docker.sh"


def why_not() -> str | None:
    """Why this machine cannot start one, or None."""
    if os.geteuid() != 0:
        return "a btrfs Docker daemon needs root (mount)"
    if not Path("/dev/loop-control").exists():
        return "a btrfs Docker daemon needs loop devices"
    if "btrfs" not in Path("/proc/filesystems").read_text():
        return "a btrfs Docker daemon needs btrfs in the kernel"
    return None


@contextlib.contextmanager
def btrfs_daemon(images: tuple[str, ...] = (), size: str = "4G") -> Iterator[tuple[docker.DockerClient, str]]:
    """A daemon on a `size` sparse btrfs loop file, holding `images` (copied from the default
    daemon, with all their tags): (its client, its DOCKER_HOST). Its containers, mount and files are gone afterwards."""
    root = f"/var/tmp/nsq-{os.getpid()}"  # short: containerd's socket paths live under it
    host = f"unix://{root}.sock"
    env = dict(os.environ, NEXTSTATE_DOCKER_BTRFS="1", NEXTSTATE_DOCKER_ROOT=root, NEXTSTATE_DOCKER_BTRFS_SIZE=size,
               DOCKER_HOST=host, DOCKERD_LOG=f"{root}.log")
    try:
        p = subprocess.run(["bash", str(_ENSURE)], env=env, capture_output=True, text=True, timeout=300)
        if p.returncode != 0 or "--storage-driver=btrfs" not in p.stderr:
            raise SandboxError(f"no btrfs daemon (exit {p.returncode}): {p.stderr[-1000:]}")
        client = docker.DockerClient(base_url=host, timeout=120)
        default = docker.from_env()
        for name in images:  # with every tag it has there (a tag names what was built, by content)
            image = default.images.get(name)
            client.images.load(image.save(named=name))
            for tag in image.tags:
                client.images.get(name).tag(tag)
        yield client, host
    finally:
        _stop(root, host)


def _stop(root: str, host: str) -> None:
    with contextlib.suppress(docker.errors.DockerException):
        for c in docker.DockerClient(base_url=host, timeout=30).containers.list(all=True):
            c.remove(force=True)
    pid_file = Path(f"{root}.pid")
    if pid_file.exists():
        pid = int(pid_file.read_text())
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        for _ in range(300):
            if not Path(f"/proc/{pid}").exists():
                break
            time.sleep(0.1)
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    for m in sorted((m for m in mounts if m == root or m.startswith(f"{root}.exec/")), reverse=True):
        subprocess.run(["umount", m], capture_output=True)  # the data root, the daemon's netns
    subprocess.run(["rm", "-rf", root, f"{root}.btrfs", f"{root}.exec", f"{root}.log", f"{root}.pid"],
                   capture_output=True)
