"""One Docker container per episode: created with limits, spoken to through a persistent shell,
always removed (context manager + idempotent close; labels let a later run reap leftovers)."""
from __future__ import annotations

import base64
import dataclasses
import io
import json
import tarfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import docker
import docker.errors
import requests.exceptions
from docker.utils import parse_bytes

from envs.sandbox.disk import WAIT_FOR_SEED, disk_full, disk_note, layer_note, scratch_mounts
from envs.sandbox.disk_watch import DiskWatch
from envs.sandbox.errors import SandboxError, SandboxFullError
from envs.sandbox.labels import run_labels
from envs.sandbox.quota import falls_back, storage_opt
from envs.sandbox.shell import PersistentShell, ShellResult
from nextstate.config import conf_defaults


@dataclass(frozen=True)
class SandboxConfig:
    """Limits and defaults of an episode's container (conf/sandbox/default.yaml sets the values)."""

    memory: str
    cpus: float
    pids_limit: int
    network: str
    init: bool  # docker-init as pid 1: zombies are reaped and stop is fast
    user: str | None  # None = the image's user
    workdir: str
    command_timeout_s: float
    output_cap_bytes: int
    async_remove: bool  # remove containers in the background so reset does not wait
    # Room for the agent's files (Docker's size suffixes: "256m"), or None for no limit: each of the
    # agent's scratch directories (`Sandbox(scratch=...)`) is a tmpfs holding the image's files plus
    # this much, and no file anywhere grows past it (RLIMIT_FSIZE); the rest of the container's
    # filesystem holds this much of new files too (its writable layer is watched while the agent
    # acts: envs/sandbox/disk_watch.py). A tmpfs lives in the container's memory: the limits of all
    # scratch directories together should stay below `memory`.
    disk_limit: str | None
    # Where the daemon's storage driver has quotas (btrfs; overlay2 on xfs with project quotas),
    # disk_limit outside the scratch mounts is a ceiling it enforces before the write instead of the
    # watch (envs/sandbox/quota.py); False = the watch everywhere.
    disk_ceiling: bool


_KILL_ALL = (Path(__file__).parent / "kill_all.sh").read_text()
_DOCKER_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException, OSError)


def docker_client() -> docker.DockerClient:
    try:
        client = docker.from_env(timeout=120)
        client.ping()
        return client
    except _DOCKER_ERRORS as e:
        raise SandboxError(f"Docker daemon is not reachable ({e}); run `make setup` or "
                           "scripts/ensure_docker.sh") from e


class Sandbox:
    """A running container with a persistent shell. Use as a context manager."""

    def __init__(self, image: str, config: SandboxConfig | None = None, *, run_id: str,
                 client: docker.DockerClient | None = None, user: str | None = None, shell: bool = True,
                 environment: dict[str, str] | None = None, scratch: tuple[str, ...] = ()):
        self.image = image
        self.scratch = scratch  # the directories the agent writes in, size-limited by config.disk_limit
        self.environment = environment  # the container's env: every exec (the agent's shell, grading) sees it
        self._want_shell = shell  # False: a harness-only container (e.g. grading), no agent shell
        self.config = config = config or conf_defaults("sandbox", "default", SandboxConfig)
        self.run_id = run_id
        self.user = user if user is not None else config.user
        self._client = client or docker_client()
        self._container = None
        self._shell: PersistentShell | None = None
        self._disk_watch: DiskWatch | None = None
        self._disk_kills_seen = 0
        self._closed = False

    def __enter__(self) -> "Sandbox":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def container_id(self) -> str | None:
        return self._container.id if self._container is not None else None

    def start(self) -> None:
        c = self.config
        try:
            disk = scratch_mounts(self._client, self.image, self.scratch, c.disk_limit)
            self.scratch = tuple(disk.tmpfs)
            options = dict(init=c.init, network_mode=c.network, mem_limit=c.memory, memswap_limit=c.memory,
                           nano_cpus=int(c.cpus * 1e9), pids_limit=c.pids_limit, labels=run_labels(self.run_id),
                           working_dir=c.workdir, stop_signal="SIGKILL", environment=self.environment,
                           tmpfs=disk.tmpfs or None, ulimits=disk.ulimits or None)
            if disk.image:  # the image's files go into the scratch mounts as the container starts
                image, command, options["user"] = disk.image, disk.main_command(), "root"
            else:
                image, command = self.image, ["sleep", "infinity"]
            self._container, ceiling = self._run_with_ceiling(image, command, options)
            if self._want_shell:
                self._shell = PersistentShell(self._client.api, self._container.id, user=self.user,
                                              workdir=c.workdir, output_cap=c.output_cap_bytes)
            if disk.image:
                self._wait_for_seed()
            if self._want_shell and c.disk_limit and not ceiling:  # the daemon cannot refuse the write: watch
                self._disk_watch = DiskWatch(self._layer_size, self._kill_for_disk, parse_bytes(c.disk_limit))
                self._disk_watch.start()
        except _DOCKER_ERRORS as e:
            self.close()
            raise SandboxError(f"could not start a container from {self.image}: {e}") from e
        except BaseException:  # a shell or seed copy that failed in a made container: it goes too
            self.close()
            raise

    def _run_with_ceiling(self, image: str, command, options: dict):
        """`containers.run`, with `disk_limit` as a ceiling the daemon enforces before the write where
        its storage driver can (envs/sandbox/quota.py): (the container, whether it has one)."""
        c = self.config
        opt = storage_opt(self._client, image, parse_bytes(c.disk_limit)) if c.disk_limit and c.disk_ceiling else None
        try:
            return self._client.containers.run(image, command, detach=True, storage_opt=opt, **options), opt is not None
        except docker.errors.APIError as e:
            if opt is None or not falls_back(self._client, e):
                raise
        return self._client.containers.run(image, command, detach=True, **options), False

    def _wait_for_seed(self) -> None:
        """The scratch mounts' copies are done (in the agent's shell: ~1 ms, no `docker exec`)."""
        if self._shell is not None:
            r = self._shell.run(WAIT_FOR_SEED, timeout=60)
            code, out = r.exit_code, r.output
        else:
            res = self._container.exec_run(["sh", "-c", WAIT_FOR_SEED], user="root")
            code, out = res.exit_code, (res.output or b"").decode(errors="replace")
        if code != 0:
            raise SandboxError(f"the image's files could not be copied into the scratch directories "
                               f"{list(self.scratch)} (exit {code}) {out[-300:]}")

    # -- the agent's shell ------------------------------------------------------------------------
    def exec(self, command: str, timeout: float | None = None) -> ShellResult:
        """Run a command in the persistent shell. Raises SandboxError when the container is gone."""
        if self._shell is None:
            raise SandboxError("sandbox is not running")
        try:
            killed = self._after_disk_kills()  # between the last command and this one
            r = self._shell.run(command, timeout=timeout or self.config.command_timeout_s)
            killed = self._after_disk_kills() or killed  # while it ran
        except (*_DOCKER_ERRORS, SandboxError) as e:
            raise SandboxError(f"container {self._short_id} failed: {self._diagnose(e)}") from e
        if self.config.disk_limit and disk_full(r.output):
            r = dataclasses.replace(r, output=r.output + disk_note(self.config.disk_limit, self.scratch))
        if killed:
            r = dataclasses.replace(r, output=r.output + layer_note(self.config.disk_limit, self.scratch,
                                                                   self._disk_watch.last_size),
                                    restarted=True)
        return r

    def _after_disk_kills(self) -> bool:
        """Whether the disk watch killed every process since this was last asked (then the agent gets
        a new shell; waits for a kill under way)."""
        w = self._disk_watch
        if w is None or w.settled_hits() == self._disk_kills_seen:
            return False
        self._disk_kills_seen = w.hits
        self._shell.restart()
        return True

    def _layer_size(self) -> int:
        """Bytes of the files the container added or changed on its own disk (not in its mounts)."""
        api = self._client.api
        res = api._result(api._get(api._url("/containers/{0}/json", self._container.id), params={"size": 1}), True)
        return int(res.get("SizeRw") or 0)

    def _kill_for_disk(self) -> None:
        self._container.exec_run(["bash", "-c", _KILL_ALL], user="root")

    def disk_watch_kills_only(self, user: str) -> None:
        """From now on (the tests run beside the agent's processes) only the non-root `user`'s
        processes are killed past the limit, never the tests; the watch goes on until close."""
        if self._disk_watch is not None:
            self._disk_watch.kill_with(lambda: self.kill_user_processes(user))

    def stop_disk_watch(self) -> None:
        """The agent's turn is over (before grading: the tests' own writes are the harness's)."""
        if self._disk_watch is not None:
            self._disk_watch.stop()

    def stop_agent_shell(self) -> None:
        """Kill the agent's shell and everything it started (a root agent's leftovers could
        otherwise rewrite the tests while they run)."""
        if self._shell is not None:
            try:
                self._shell.kill_all()
            except _DOCKER_ERRORS as e:
                raise SandboxError(f"container {self._short_id} failed: {self._diagnose(e)}") from e
            self._shell = None

    def kill_all_processes(self, then: str = "") -> None:
        """Every process in the container but its init and main process is killed, then `then` runs
        (as root, in the same exec). Before a root agent is graded: whatever it left behind (a
        double-forked loop re-parented to pid 1, a `setsid` daemon) would otherwise be running while
        the tests are copied in and run, and could rewrite them. Killing the agent shell's
        descendants misses every process that left that tree; `pkill -u <agent>` is no help when the
        agent is root.

        How: from a fresh `docker exec` as root, `kill -STOP -1` freezes every process this one may
        signal but itself and pid 1 (one kill(2): a fork loop cannot outrun it, a stopped process
        cannot fork); then each one is sent SIGKILL, and the container's main process (`sleep
        infinity`, the child of docker-init that started first) is let go again: its death would
        stop the container. `kill -9 -1` alone would take the main process with it."""
        self.stop_disk_watch()
        script = _KILL_ALL + then
        try:
            self._container.exec_run(["bash", "-c", script], user="root")
        except _DOCKER_ERRORS as e:
            raise SandboxError(f"container {self._short_id} failed: {self._diagnose(e)}") from e
        if self._shell is not None:  # it was killed with the rest
            self._shell.close()
            self._shell = None

    def kill_user_processes(self, user: str) -> None:
        """Every process of the (non-root) `user` is killed: as that user, `kill -STOP -1` freezes
        them all in one kill(2) (a fork loop cannot outrun it), then `kill -KILL -1` ends them; the
        caller itself is spared by both. Before a non-root verifier runs: a loop the agent left
        running as that user could write the reward file the verifier's directory is made for."""
        if user in ("root", "0"):
            raise ValueError("kill_user_processes is for a non-root user (see kill_all_processes)")
        try:
            self._container.exec_run(["bash", "-c", "kill -STOP -1; kill -KILL -1; true"], user=user)
        except _DOCKER_ERRORS as e:
            raise SandboxError(f"container {self._short_id} failed: {self._diagnose(e)}") from e

    # -- the harness's one-off commands (grading, setup) ------------------------------------------
    def run(self, command: str, *, user: str = "root", workdir: str | None = None,
            timeout: float = 60.0, environment: dict[str, str] | None = None) -> tuple[int, str]:
        """Run a command outside the agent's shell (e.g. the task's tests). Returns (exit, output)."""
        wrapped = ["timeout", "-s", "KILL", f"{timeout:g}", "bash", "-c", command]
        try:
            res = self._container.exec_run(wrapped, user=user, workdir=workdir or self.config.workdir,
                                           environment=environment, demux=False)
            if res.exit_code >= 126 and self._died_meanwhile():  # a kill, or Docker's answer from a dying container
                raise SandboxError(f"container {self._short_id} died: "
                                   f"{self._diagnose(RuntimeError(f'exec {res.exit_code}'))}")
        except _DOCKER_ERRORS as e:
            raise SandboxError(f"container {self._short_id} failed: {self._diagnose(e)}") from e
        return res.exit_code, (res.output or b"").decode("utf-8", errors="replace")

    def _died_meanwhile(self, wait_s: float = 1.0) -> bool:
        """Whether the container stopped: `docker kill` ends the exec (126, 137) a moment before the
        container's state says so, so a dead-looking exit is checked for a second before it is the
        command's own (a test run that failed must not be filed as infra, nor a killed one as failed)."""
        deadline = time.monotonic() + wait_s
        while True:
            if not self._running():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)

    def _running(self) -> bool:
        try:
            self._container.reload()
            return bool(self._container.attrs.get("State", {}).get("Running"))
        except _DOCKER_ERRORS:
            return False

    def upload(self, src: Path | str, dest: str) -> None:
        """Copy a local file or directory to `dest` (a directory path inside the container)."""
        src = Path(src)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.add(src, arcname=src.name, filter=_owned_by_root)
        self._put(buf.getvalue(), dest)

    def upload_bytes(self, data: bytes, dest_file: str, mode: int = 0o644) -> None:
        p = PurePosixPath(dest_file)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(p.name)
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            tar.addfile(info, io.BytesIO(data))
        self._put(buf.getvalue(), str(p.parent))

    def upload_files(self, files: dict[str, bytes], mode: int = 0o644) -> None:
        """Several files at absolute paths in one archive: one API call and no exec (Docker
        creates missing parent directories)."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for path, data in files.items():
                info = _owned_by_root(tarfile.TarInfo(str(PurePosixPath(path)).lstrip("/")))
                info.size, info.mode, info.mtime = len(data), mode, int(time.time())
                tar.addfile(info, io.BytesIO(data))
        try:
            self._container.put_archive("/", buf.getvalue())
        except _DOCKER_ERRORS as e:
            raise self._upload_error(f"upload of {sorted(files)} failed: {e}") from e

    def download(self, path: str) -> bytes:
        """The content of one file inside the container."""
        try:
            stream, _ = self._container.get_archive(path)
            with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
                member = tar.next()
                f = tar.extractfile(member) if member else None
                if f is None:
                    raise SandboxError(f"{path} is not a regular file")
                return f.read()
        except docker.errors.NotFound as e:
            raise FileNotFoundError(path) from e
        except _DOCKER_ERRORS as e:
            raise SandboxError(f"download of {path} failed: {e}") from e

    def changes(self) -> list[dict]:
        """Every path changed against the image (`docker diff`: [{"Path", "Kind"}]), as the daemon sees it."""
        try:
            return self._container.diff() or []
        except _DOCKER_ERRORS as e:
            raise SandboxError(f"container {self._short_id} failed: {self._diagnose(e)}") from e

    def is_dir(self, path: str) -> bool:
        """Whether `path` is a directory, from the daemon's stat (nothing in the container runs)."""
        api = self._container.client.api
        try:
            res = api.head(api._url("/containers/{0}/archive", self._container.id), params={"path": path})
        except _DOCKER_ERRORS as e:
            raise SandboxError(f"container {self._short_id} failed: {self._diagnose(e)}") from e
        stat = res.headers.get("X-Docker-Container-Path-Stat")
        return bool(stat) and bool(json.loads(base64.b64decode(stat))["mode"] & (1 << 31))

    def _put(self, tar_bytes: bytes, dest: str) -> None:
        try:
            made = self._container.exec_run(["mkdir", "-p", dest], user="root")
            if made.exit_code != 0:
                out = (made.output or b"").decode(errors="replace").strip()
                raise self._upload_error(f"upload to {dest} failed: {out}")
            self._container.put_archive(dest, tar_bytes)
        except _DOCKER_ERRORS as e:
            raise self._upload_error(f"upload to {dest} failed: {e}") from e

    def _upload_error(self, message: str) -> SandboxError:
        """A full disk in a live container is the agent's (SandboxFullError); anything else infra."""
        if disk_full(message) and self._running():
            return SandboxFullError(f"{message} (the container's disk is full: sandbox.disk_limit is "
                                    f"{self.config.disk_limit})")
        return SandboxError(message)

    # -- teardown ---------------------------------------------------------------------------------
    def close(self) -> None:
        """Idempotent. Removes the container (in the background when configured)."""
        if self._closed:
            return
        self._closed = True
        if self._disk_watch is not None:  # (not waiting: a look may hang as long as the daemon does)
            self._disk_watch.stop(wait=False)
        if self._shell is not None:
            self._shell.close()
        container, self._container = self._container, None
        if container is None:
            return
        if self.config.async_remove:
            t = threading.Thread(target=_remove_quietly, args=(container,), name="nextstate-remove")
            _REMOVERS.add(t)
            t.start()
        else:
            _remove_quietly(container)

    # -- helpers ----------------------------------------------------------------------------------
    @property
    def _short_id(self) -> str:
        return (self.container_id or "?")[:12]

    def _diagnose(self, err: Exception) -> str:
        try:
            self._container.reload()
            state = self._container.attrs.get("State", {})
            if not state.get("Running"):
                return f"container is {state.get('Status')} (OOMKilled={state.get('OOMKilled')})"
        except Exception as e2:  # the daemon itself may be gone
            return f"{err}; and the daemon did not answer: {e2}"
        return str(err)


def _owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """Uploaded files belong to root in the container, whoever runs the harness: a non-root agent
    can then read but never rewrite what the harness puts there (e.g. the tests)."""
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


_REMOVERS: set[threading.Thread] = set()


def _remove_quietly(container) -> None:
    try:
        container.remove(force=True)
    except _DOCKER_ERRORS:  # already gone, or the daemon with it: the reaper handles leftovers
        pass
    finally:
        _REMOVERS.discard(threading.current_thread())


def wait_for_background_removals(timeout: float = 30.0) -> None:
    """Join the background remover threads (call at process exit so nothing is left behind)."""
    deadline = time.monotonic() + timeout
    for t in list(_REMOVERS):
        t.join(max(0.0, deadline - time.monotonic()))



