"""Start, attach to and stop serving endpoints. The harness starts the embedded CPU server itself;
on a GPU machine it launches (or attaches to) a real SGLang server kept in its own Python env.
`serve_endpoints` does the same for several servers of one model (`replicas`, or `servers` to attach).

Keys: a server the harness launches requires `Authorization: Bearer <key>` on every route but
`/health`, the key a random one made at launch (one per `serve_endpoints`, shared by its replicas) and
written to the server's stdin at launch (the first line; `--key-on-stdin`): never on its command
line, which `ps` shows to every user, nor in its environment, which `/proc/<pid>/environ` keeps for
the process's whole life even after it is popped. It is kept in memory only (HTTPPolicy, Endpoints),
never in the run dir or a log. An attached server gets `backend.api_key` (NEXTSTATE_BACKEND_API_KEY;
empty = it takes none)."""
from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import requests


@dataclass
class BackendConfig:
    name: str  # embedded | sglang
    url: str | None  # attach to a running server instead of launching one
    servers: list[str]  # attach to several running servers (with `url`, if also given), balanced
    replicas: int  # launch this many servers, each on its own port, balanced (ignored when attaching)
    python: str | None  # sglang: the interpreter of its own env
    host: str
    port: int | None  # None = a free port
    max_batch: int
    threads: int | None
    startup_timeout_s: float
    extra_args: list[str]
    prefix_cache_tokens: int  # embedded: KV of recent prompts reused for shared prefixes (0 = off)
    request_deadline_s: float | None  # embedded: a reply ends (finish reason "length") this long after its request
    preempt_after_s: float | None  # embedded: a batch runs this long before waiting requests preempt it (None: never)
    # the key attached servers (url, servers) require; launched ones get a random key each run
    api_key: str = field(default="", repr=False)


KEY_ENV = "NEXTSTATE_SERVER_API_KEY"  # a server started by hand may take its key here; launched ones read stdin


def new_key() -> str:
    return secrets.token_urlsafe(32)


def default_server_threads() -> int:
    """Half the cores: the sandboxes, the env and the trainer need the rest. Oversubscribed torch
    threads spin against each other; measured here, 2 threads on a busy 2-core machine generated
    7x slower than 1."""
    return max(1, (os.cpu_count() or 2) // 2)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _embedded_command(cfg: BackendConfig, model_path: str, port: int, dtype: str, model_name: str) -> list[str]:
    return [sys.executable, "-m", "agents.serving.embedded_server", "--model-path", model_path,
            "--host", cfg.host, "--port", str(port), "--dtype", dtype, "--model-name", model_name,
            "--max-batch", str(cfg.max_batch), "--parent-pid", str(os.getpid()),
            "--threads", str(cfg.threads or default_server_threads()),
            "--prefix-cache-tokens", str(cfg.prefix_cache_tokens),
            "--request-deadline-s", str(cfg.request_deadline_s or 0),
            "--preempt-after-s", str(cfg.preempt_after_s or 0), "--key-on-stdin"]


def _sglang_command(cfg: BackendConfig, model_path: str, port: int, dtype: str, model_name: str) -> list[str]:
    if not cfg.python:
        raise ValueError("backend=sglang needs backend.python (its own env), or backend.url / backend.servers "
                         "to attach")
    # SGLang takes its key only as `--api-key` on the command line; this shim adds it to sys.argv inside
    # the process (the OS's copy of argv, which `ps` reads, keeps the command without it) and runs
    # `python -m sglang.launch_server` as it would run. The key comes on stdin, like the embedded server's.
    shim = ("import runpy, sys; key = sys.stdin.readline().strip(); "
            "sys.argv = ['sglang.launch_server', *sys.argv[1:], *(['--api-key', key] if key else [])]; "
            "runpy.run_module('sglang.launch_server', run_name='__main__', alter_sys=True)")
    return [cfg.python, "-c", shim, "--model-path", model_path,
            "--host", cfg.host, "--port", str(port), "--dtype", dtype]


# conf/backend/<name>.yaml -> the command that launches that server
LAUNCH = {"embedded": _embedded_command, "sglang": _sglang_command}


class Server:
    """A running endpoint; a context manager that stops what it launched (never what it attached to)."""

    def __init__(self, cfg: BackendConfig, model_path: str | Path, *, model_name: str, dtype: str,
                 log_path: Path | None = None, wait: bool = True):
        """`wait=False` returns once launched; `wait_healthy()` then waits (to start several at once)."""
        self.cfg = cfg
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None
        self.api_key = cfg.api_key  # launched: the given one, else a fresh random key
        if cfg.url:
            self.url = cfg.url.rstrip("/")
            if wait:
                self.wait_healthy()
            return
        port = cfg.port or _free_port()
        self.url = f"http://{cfg.host}:{port}"
        if cfg.name not in LAUNCH:
            raise ValueError(f"unknown backend {cfg.name!r}; choose one of {sorted(LAUNCH)}")
        cmd = LAUNCH[cfg.name](cfg, str(model_path), port, dtype, model_name)
        cmd += list(cfg.extra_args)
        self.api_key = cfg.api_key or new_key()
        log = open(log_path, "ab") if log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True, cwd=Path(__file__).resolve().parents[2],
                                     env={k: v for k, v in os.environ.items() if k != KEY_ENV})
        self.proc.stdin.write(self.api_key.encode() + b"\n")  # a few bytes: the pipe's buffer takes them
        self.proc.stdin.close()
        if wait:
            self.wait_healthy()

    def wait_healthy(self) -> None:
        log_path = self.log_path
        deadline = time.monotonic() + self.cfg.startup_timeout_s
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                tail = Path(log_path).read_text()[-2000:] if log_path and Path(log_path).exists() else ""
                raise RuntimeError(f"{self.cfg.name} server exited with {self.proc.returncode}\n{tail}")
            try:
                if requests.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        self.close()
        raise TimeoutError(f"{self.cfg.name} server at {self.url} not healthy after {self.cfg.startup_timeout_s}s")

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None

    @property
    def headers(self) -> dict[str, str]:
        """What a request to this server carries (the key, when it takes one)."""
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def attach_urls(cfg: BackendConfig) -> list[str]:
    """The running servers the config names (`url` first, then `servers`); empty = launch our own."""
    urls = [cfg.url] if cfg.url else []
    return list(dict.fromkeys(u.rstrip("/") for u in urls + list(cfg.servers)))


def _replica_log(log_path: Path | None, i: int, replicas: int) -> Path | None:
    if log_path is None or replicas == 1:
        return log_path
    return log_path.with_name(f"{log_path.stem}.{i}{log_path.suffix}")


@dataclass(frozen=True)
class Served:
    """The servers of one model: their URLs and the key they require ("" = none)."""
    urls: list[str]
    api_key: str = field(default="", repr=False)


@contextmanager
def serve_endpoints(cfg: BackendConfig, model_path: str | Path, *, model_name: str, dtype: str,
                    log_path: Path | None = None) -> Iterator[Served]:
    """The servers for one model: the attached ones (`url`, `servers`, with `api_key`), or `replicas`
    launched ones (all launched first, then waited for: a large model loads for minutes), each on
    its own port and stopped after, all requiring one fresh random key. Replicas share the server's
    default threads (half the cores) unless `threads` is set: more threads than cores slow every
    server down."""
    attached = attach_urls(cfg)
    if cfg.replicas < 1:
        raise ValueError(f"backend.replicas={cfg.replicas}: must be at least 1")
    if not attached:
        cfg = replace(cfg, api_key=new_key())  # never the attached servers' key from the environment
    with ExitStack() as stack:
        if attached:
            servers = [stack.enter_context(Server(replace(cfg, url=u), model_path, model_name=model_name,
                                                  dtype=dtype)) for u in attached]
        else:
            ports = _distinct_ports(cfg.replicas) if cfg.port is None else [cfg.port + i for i in range(cfg.replicas)]
            threads = cfg.threads or max(1, default_server_threads() // cfg.replicas)
            servers = [stack.enter_context(Server(replace(cfg, port=port, threads=threads), model_path,
                                                  model_name=model_name, dtype=dtype, wait=False,
                                                  log_path=_replica_log(log_path, i, cfg.replicas)))
                       for i, port in enumerate(ports)]
            for server in servers:
                server.wait_healthy()
        yield Served([s.url for s in servers], cfg.api_key)


def _distinct_ports(n: int) -> list[int]:
    """n free ports, all different (each socket is held until all are found)."""
    with ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
