"""A disk limit without a disk quota: the agent's scratch directories are size-limited tmpfs mounts.

Docker's `--storage-opt size=` needs overlay2 on xfs with project quotas, which a laptop or a CI
runner rarely has; without a limit an agent's `dd if=/dev/zero of=/tmp/x` fills the host's disk at
a GB a second. So the directories an agent writes in (the terminal env's workdir, /tmp, /var/tmp,
/home) are tmpfs mounts holding the image's files plus `disk_limit`, and RLIMIT_FSIZE keeps any one
file anywhere else (a root agent's /root, /opt) within `disk_limit` too. A write past either fails
with ENOSPC ("No space left on device") or EFBIG/SIGXFSZ ("File size limit exceeded"): the agent's
command fails, the agent's episode goes on, and the next state says which limit it met. Many files
elsewhere, each below the limit, are bounded by a watch on the container's writable layer
(envs/sandbox/disk_watch.py).

A tmpfs starts empty and Docker copies nothing into it (nor into a tmpfs-backed volume: tried, on
Docker 20.10), and the daemon's `put_archive` writes beneath a tmpfs mount, not into it. So the
image's files in each directory are read once per image (from a created, never started
container) and staged once, in an image made from it (`nextstate-seeded/...`: the image plus
/.nextstate-seed/<i>/); each container of that image has them copied into its mounts by its main
process (as root, `cp -a`, before it becomes `sleep infinity`) while the agent's shell starts, and
the shell's first command waits for the copies. Neither costs a reset an API call: no `docker exec`
(~0.1 s), no `put_archive` into the created container (~0.1 s under load: the daemon mounts and
unmounts its filesystem for it). The mount itself takes the directory's owner and mode. A directory whose files
alone exceed the limit is left on the container's disk (a tmpfs of its size would take as much
memory).
"""
from __future__ import annotations

import hashlib
import io
import posixpath
import tarfile
from dataclasses import dataclass, field

import docker
import docker.errors
import docker.types
from docker.utils import parse_bytes

from envs.sandbox.errors import SandboxError

_STAGE = ".nextstate-seed"
_SEEDED = "nextstate-seeded"  # the repository of the images holding the staged files
_PAGE = 4096
# lower case: a shell prints "Disk quota exceeded", the daemon's copy into a container "disk quota exceeded"
_FULL = ("no space left on device", "file size limit exceeded", "file too large", "disk quota exceeded")


@dataclass(frozen=True)
class _Dir:
    """A directory of an image: its owner and mode, and its files as a tar (names relative to it)."""
    uid: int
    gid: int
    mode: int
    tar: bytes
    size: int  # bytes on a tmpfs, rounded up to pages




@dataclass(frozen=True)
class ScratchMounts:
    """What `Sandbox.start` needs for the scratch directories: Docker's tmpfs and ulimit options, and
    (when the image has files there) the image to start instead, holding them staged, with the main
    command that copies them into the mounts and then becomes `sleep infinity`."""
    tmpfs: dict[str, str] = field(default_factory=dict)  # path -> Docker's tmpfs options
    ulimits: list = field(default_factory=list)
    image: str | None = None  # the image plus its files of each directory, under /.nextstate-seed/<i>/
    copies: str = ""  # the shell commands copying them into place

    def main_command(self) -> list[str]:
        """The container's main process: as root, the copies, then `exec sleep infinity` (the same
        pid: still the main process Sandbox.kill_all_processes spares). It leaves a mark either way."""
        return ["sh", "-c", f"{{ {self.copies}; }} && touch /{_STAGE}.done || touch /{_STAGE}.failed; "
                            "exec sleep infinity"]


# Run in the agent's shell before its first command (the copies run beside the shell's start).
WAIT_FOR_SEED = (f"until [ -e /{_STAGE}.done ] || [ -e /{_STAGE}.failed ]; do sleep 0.005; done; "
                 f"[ -e /{_STAGE}.done ]")
_MOUNTS: dict[tuple, ScratchMounts] = {}  # (image id, paths, limit) -> the mounts


def scratch_dirs(paths: tuple[str, ...]) -> list[str]:
    """`paths` normalized, without "/", relative paths, or a path inside another one (its parent's
    tmpfs holds it: /home/builder/work is in /home's)."""
    norm = sorted({posixpath.normpath(p) for p in paths if p.startswith("/") and posixpath.normpath(p) != "/"})
    return [p for p in norm if not any(p.startswith(q + "/") for q in norm if q != p)]


def scratch_mounts(client: docker.DockerClient, image: str, paths: tuple[str, ...],
                   limit: str | None) -> ScratchMounts:
    """The tmpfs mounts and ulimits that give each of `paths` room for `limit` of new files (the
    same for every container of an image: made once per process, by the image's name; the envs'
    images are tagged by their content)."""
    if not limit:
        return ScratchMounts()
    key = (image, paths, limit)
    if key not in _MOUNTS:
        _MOUNTS[key] = _mounts(client, image, paths, limit)
    return _MOUNTS[key]


def _mounts(client: docker.DockerClient, image: str, paths: tuple[str, ...], limit: str) -> ScratchMounts:
    room = parse_bytes(limit)
    tmpfs, seeds = {}, {}
    for path in scratch_dirs(paths):
        d = _image_dir(client, image, path)
        if d is None:  # not in the image: Docker makes it, as for any mount
            mode = "1777" if path in ("/tmp", "/var/tmp") else "755"
            tmpfs[path] = f"size={room},exec,mode={mode}"
        elif d.size <= room:
            tmpfs[path] = f"size={room + d.size},exec,mode={d.mode:o},uid={d.uid},gid={d.gid}"
            if d.tar:
                seeds[path] = d
    if not seeds:
        return ScratchMounts(tmpfs, [docker.types.Ulimit(name="fsize", soft=room, hard=room)])
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as out:
        for i, d in enumerate(seeds.values()):
            top = tarfile.TarInfo(f"{_STAGE}/{i}")  # `cp -a dir/.` gives the target dir its attributes
            top.type, top.uid, top.gid, top.mode = tarfile.DIRTYPE, d.uid, d.gid, d.mode
            out.addfile(top)
            with tarfile.open(fileobj=io.BytesIO(d.tar)) as src:
                for m in src.getmembers():
                    m.name = f"{_STAGE}/{i}/{m.name}"
                    if m.islnk():
                        m.linkname = f"{_STAGE}/{i}/{m.linkname}"
                    out.addfile(m, src.extractfile(m) if m.isfile() else None)
    copies = " && ".join(f"cp -a /{_STAGE}/{i}/. {_quote(p)}/" for i, p in enumerate(seeds))
    return ScratchMounts(tmpfs, [docker.types.Ulimit(name="fsize", soft=room, hard=room)],
                         _seeded_image(client, image, buf.getvalue()), copies)


def _seeded_image(client: docker.DockerClient, image: str, archive: bytes) -> str:
    """`image` with `archive` in it (made once: its tag is a hash of both)."""
    try:
        digest = hashlib.sha256(client.images.get(image).id.encode() + archive).hexdigest()[:16]
        tag = f"{_SEEDED}:{digest}"
        try:
            client.images.get(tag)
            return tag
        except docker.errors.ImageNotFound:
            pass
        c = client.containers.create(image, ["true"])
        try:
            c.put_archive("/", archive)
            c.commit(_SEEDED, digest)
        finally:
            c.remove(force=True)
        return tag
    except (docker.errors.DockerException, OSError) as e:
        raise SandboxError(f"could not stage the scratch directories' files of {image}: {e}") from e


def _image_dir(client: docker.DockerClient, image: str, path: str) -> _Dir | None:
    try:
        c = client.containers.create(image, ["true"], network_disabled=True)
        try:
            stream, _ = c.get_archive(path)
            return _relative(b"".join(stream))
        except docker.errors.NotFound:
            return None
        finally:
            c.remove(force=True)
    except (docker.errors.DockerException, OSError) as e:
        raise SandboxError(f"could not read {path} of {image}: {e}") from e


def _relative(archive: bytes) -> _Dir | None:
    """The directory's own entry (the first), and its contents renamed relative to it."""
    buf, size = io.BytesIO(), 0
    with tarfile.open(fileobj=io.BytesIO(archive)) as src, tarfile.open(fileobj=buf, mode="w") as out:
        top = src.next()
        if top is None or not top.isdir():
            return None
        n = 0
        for m in src.getmembers()[1:]:
            m.name = m.name[len(top.name) + 1:]
            if m.islnk():
                m.linkname = m.linkname[len(top.name) + 1:]
            out.addfile(m, src.extractfile(m) if m.isfile() else None)
            size += -(-m.size // _PAGE) * _PAGE + _PAGE  # its pages, and one for the inode's share
            n += 1
    return _Dir(top.uid, top.gid, top.mode & 0o7777, buf.getvalue() if n else b"", size)


def _quote(path: str) -> str:
    return "'" + path.replace("'", "'\\''") + "'"


def disk_full(output: str) -> bool:
    output = output.lower()
    return any(s in output for s in _FULL)


def disk_note(limit: str, scratch: tuple[str, ...]) -> str:
    where = f"in each of {', '.join(scratch)} and in the rest of its filesystem, " if scratch else ""
    return (f"\n[disk limit: the sandbox holds at most {limit} of new files {where}and no file larger than "
            f"{limit} (sandbox.disk_limit); delete files to make room]")


def layer_note(limit: str, scratch: tuple[str, ...], size: int) -> str:
    where = f" outside {', '.join(scratch)}" if scratch else ""
    return (f"\n[disk limit: the container's filesystem{where} holds at most {limit} of new files "
            f"(sandbox.disk_limit), and {size >> 20} MiB were written: every process in the sandbox was "
            f"killed and a new shell started (shell variables were reset); delete files to make room]")
