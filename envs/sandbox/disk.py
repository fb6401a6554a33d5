"""A disk limit without a disk quota: the agent's scratch directories are size-limited tmpfs mounts.

Docker's `--storage-opt size=` needs overlay2 on xfs with project quotas, which a laptop or a CI
runner rarely has; without a limit an agent's `dd if=/dev/zero of=/tmp/x` fills the host's disk at
a GB a second. So the directories an agent writes in (the terminal env's workdir, /tmp, /var/tmp,
/home) are tmpfs mounts holding the image's files plus `disk_limit`, and RLIMIT_FSIZE keeps any one
file anywhere else (a root agent's /root, /opt) within `disk_limit` too. A write past either fails
with ENOSPC ("No space left on device") or EFBIG/SIGXFSZ ("File size limit exceeded"): the agent's
command fails, the agent's episode goes on, and the next state says which limit it met.

A tmpfs starts empty and Docker copies nothing into it (nor into a tmpfs-backed volume: tried, on
Docker 20.10), and the daemon's `put_archive` writes beneath a tmpfs mount, not into it. So the
image's files in each directory are read once per image (from a created, never started
container), and copied in at start from a staging directory by `cp -a`, as root, before the agent's
shell exists; the mount itself takes the directory's owner and mode. A directory whose files alone
exceed the limit is left on the container's disk (a tmpfs of its size would take as much memory).
"""
from __future__ import annotations

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
_PAGE = 4096
_FULL = ("No space left on device", "File size limit exceeded", "File too large", "Disk quota exceeded")


@dataclass(frozen=True)
class _Dir:
    """A directory of an image: its owner and mode, and its files as a tar (names relative to it)."""
    uid: int
    gid: int
    mode: int
    tar: bytes
    size: int  # bytes on a tmpfs, rounded up to pages


_IMAGE_DIRS: dict[tuple[str, str], _Dir | None] = {}  # (image id, path) -> the image's directory


@dataclass
class ScratchMounts:
    tmpfs: dict[str, str] = field(default_factory=dict)  # path -> Docker's tmpfs options
    ulimits: list = field(default_factory=list)
    _seeds: dict[str, _Dir] = field(default_factory=dict)

    def seed(self, container) -> None:
        """Copy the image's files into the tmpfs mounts of the running `container`."""
        if not self._seeds:
            return
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as out:
            for i, d in enumerate(self._seeds.values()):
                top = tarfile.TarInfo(f"{_STAGE}/{i}")  # `cp -a dir/.` gives the target dir its attributes
                top.type, top.uid, top.gid, top.mode = tarfile.DIRTYPE, d.uid, d.gid, d.mode
                out.addfile(top)
                with tarfile.open(fileobj=io.BytesIO(d.tar)) as src:
                    for m in src.getmembers():
                        m.name = f"{_STAGE}/{i}/{m.name}"
                        if m.islnk():
                            m.linkname = f"{_STAGE}/{i}/{m.linkname}"
                        out.addfile(m, src.extractfile(m) if m.isfile() else None)
        copies = " && ".join(f"cp -a /{_STAGE}/{i}/. {_quote(p)}/" for i, p in enumerate(self._seeds))
        try:
            container.put_archive("/", buf.getvalue())
            res = container.exec_run(["sh", "-c", f"{copies}; s=$?; rm -rf /{_STAGE}; exit $s"], user="root")
        except (docker.errors.DockerException, OSError) as e:
            raise SandboxError(f"could not copy the image's files into the scratch directories: {e}") from e
        if res.exit_code != 0:
            raise SandboxError("could not copy the image's files into the scratch directories "
                               f"{sorted(self._seeds)}: {(res.output or b'').decode(errors='replace')[-500:]}")


def scratch_dirs(paths: tuple[str, ...]) -> list[str]:
    """`paths` normalized, without "/", relative paths, or a path inside another one (its parent's
    tmpfs holds it: /home/builder/work is in /home's)."""
    norm = sorted({posixpath.normpath(p) for p in paths if p.startswith("/") and posixpath.normpath(p) != "/"})
    return [p for p in norm if not any(p.startswith(q + "/") for q in norm if q != p)]


def scratch_mounts(client: docker.DockerClient, image: str, paths: tuple[str, ...],
                   limit: str | None) -> ScratchMounts:
    """The tmpfs mounts and ulimits that give each of `paths` room for `limit` of new files."""
    if not limit:
        return ScratchMounts()
    room = parse_bytes(limit)
    mounts = ScratchMounts(ulimits=[docker.types.Ulimit(name="fsize", soft=room, hard=room)])
    for path in scratch_dirs(paths):
        d = _image_dir(client, image, path)
        if d is None:  # not in the image: Docker makes it, as for any mount
            mode = "1777" if path in ("/tmp", "/var/tmp") else "755"
            mounts.tmpfs[path] = f"size={room},exec,mode={mode}"
        elif d.size <= room:
            mounts.tmpfs[path] = f"size={room + d.size},exec,mode={d.mode:o},uid={d.uid},gid={d.gid}"
            if d.tar:
                mounts._seeds[path] = d
    return mounts


def _image_dir(client: docker.DockerClient, image: str, path: str) -> _Dir | None:
    try:
        key = (client.images.get(image).id, path)
        if key not in _IMAGE_DIRS:
            c = client.containers.create(image, ["true"], network_disabled=True)
            try:
                stream, _ = c.get_archive(path)
                _IMAGE_DIRS[key] = _relative(b"".join(stream))
            except docker.errors.NotFound:
                _IMAGE_DIRS[key] = None
            finally:
                c.remove(force=True)
        return _IMAGE_DIRS[key]
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
    return any(s in output for s in _FULL)


def disk_note(limit: str, scratch: tuple[str, ...]) -> str:
    where = f"in each of {', '.join(scratch)} and " if scratch else ""
    return (f"\n[disk limit: the sandbox holds at most {limit} of new files {where}no file larger than "
            f"{limit} (sandbox.disk_limit); delete files to make room]")
