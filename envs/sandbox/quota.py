"""`disk_limit` as a ceiling the daemon enforces before the write, where it can.

The disk watch (envs/sandbox/disk_watch.py) holds the container's own disk to `disk_limit` by
looking, so a writer gets past it by what it writes between two looks: a root agent writing 100
files of 4 MiB landed 109 MiB against a 16m limit on an idle machine (benchmarks/disk_ceiling.py).
Docker's `--storage-opt size=` makes the daemon refuse the write itself (EDQUOT, "Disk quota
exceeded"), however fast the writer and however busy the machine, but only with some storage
drivers: btrfs (a qgroup limit) and overlay2 on xfs mounted with project quotas (this kernel has no
xfs quotas). A container of such a daemon gets the ceiling and no watch; elsewhere the watch holds.
`NEXTSTATE_DOCKER_BTRFS=1 scripts/ensure_docker.sh` starts the daemon on a btrfs data root (a
sparse loop file). It is not the default: with quotas on, building the 40 terminal task images took
303 s there (44 s on overlay2 on the same machine, which may have found layers cached), a
container's start ~0.07 s more and its removal ~0.15 s more (in the background), and a watch's look
~150 ms instead of ~1 ms (benchmarks/disk_ceiling.py).

On btrfs the count includes the image's own bytes, which btrfs and Docker count differently (a
404 MB image: 18 MiB more than Docker's size; a 484 MB one: 58 MiB less): 5% of the image is added,
so the ceiling is looser than `disk_limit` by what is left over. A container the daemon cannot
create under that estimate (its image counts more than 5% over) starts without a ceiling, watched.
"""
from __future__ import annotations

import threading
import weakref

import docker
import docker.errors

_UNSUPPORTED = ("storage-opt", "storage opt", "quota")  # words of the daemon's refusals
_lock = threading.Lock()
# per client (two daemons on unix sockets share one base URL): its driver with a quota, or None,
# and the sizes of its images
_daemons: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _Daemon:
    def __init__(self, client: docker.DockerClient):
        info = client.info()
        name, status = info.get("Driver"), dict(info.get("DriverStatus") or [])
        xfs = name == "overlay2" and status.get("Backing Filesystem") == "xfs"
        self.driver: str | None = name if name == "btrfs" or xfs else None
        self.image_sizes: dict[str, int] = {}


def _daemon(client: docker.DockerClient) -> _Daemon:
    with _lock:
        d = _daemons.get(client.api)
    if d is None:
        d = _Daemon(client)
        with _lock:
            _daemons[client.api] = d
    return d


def storage_opt(client: docker.DockerClient, image: str, limit: int) -> dict | None:
    """Docker's `storage_opt` for a ceiling of `limit` bytes of new files in a container of `image`,
    or None where the daemon cannot enforce one."""
    d = _daemon(client)
    if d.driver is None:
        return None
    size = limit
    if d.driver == "btrfs":  # the qgroup counts every byte the container's subvolume refers to
        if image not in d.image_sizes:
            d.image_sizes[image] = int(client.images.get(image).attrs.get("Size") or 0)
        base = d.image_sizes[image]
        size += base + base // 20  # btrfs counts the image's metadata too: ~5% of it (measured 4.7%)
    return {"size": str(size)}


def falls_back(client: docker.DockerClient, error: docker.errors.APIError) -> bool:
    """Whether a container refused with a ceiling starts without one (and is watched): the image
    alone counts more than estimated ("quota exceeded" at creation), or the daemon has no quota
    after all (overlay2 on an xfs without project quotas: then it is not asked again)."""
    text = str(error).lower()
    if "quota exceeded" in text:
        return True
    if not any(w in text for w in _UNSUPPORTED):
        return False
    _daemon(client).driver = None
    return True


def enforced(client: docker.DockerClient) -> bool:
    """Whether containers of this daemon get a hard ceiling."""
    return _daemon(client).driver is not None
