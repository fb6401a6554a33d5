"""Start, attach to and stop serving endpoints. The harness starts the embedded CPU server itself;
on a GPU machine it launches (or attaches to) a real SGLang server kept in its own Python env."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import requests


@dataclass
class BackendConfig:
    name: str  # embedded | sglang
    url: str | None  # attach to a running server instead of launching one
    python: str | None  # sglang: the interpreter of its own env
    host: str
    port: int | None  # None = a free port
    max_batch: int
    threads: int | None
    startup_timeout_s: float
    extra_args: list[str]
    prefix_cache_tokens: int  # embedded: KV of recent prompts reused for shared prefixes (0 = off)


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
            "--prefix-cache-tokens", str(cfg.prefix_cache_tokens)]


def _sglang_command(cfg: BackendConfig, model_path: str, port: int, dtype: str, model_name: str) -> list[str]:
    if not cfg.python:
        raise ValueError("backend=sglang needs backend.python (its own env) or backend.url")
    return [cfg.python, "-m", "sglang.launch_server", "--model-path", model_path,
            "--host", cfg.host, "--port", str(port), "--dtype", dtype]


# conf/backend/<name>.yaml -> the command that launches that server
LAUNCH = {"embedded": _embedded_command, "sglang": _sglang_command}


class Server:
    """A running endpoint; a context manager that stops what it launched (never what it attached to)."""

    def __init__(self, cfg: BackendConfig, model_path: str | Path, *, model_name: str, dtype: str,
                 log_path: Path | None = None):
        self.cfg = cfg
        self.proc: subprocess.Popen | None = None
        if cfg.url:
            self.url = cfg.url.rstrip("/")
            self._wait_healthy(None)
            return
        port = cfg.port or _free_port()
        self.url = f"http://{cfg.host}:{port}"
        if cfg.name not in LAUNCH:
            raise ValueError(f"unknown backend {cfg.name!r}; choose one of {sorted(LAUNCH)}")
        cmd = LAUNCH[cfg.name](cfg, str(model_path), port, dtype, model_name)
        cmd += list(cfg.extra_args)
        log = open(log_path, "ab") if log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                     cwd=Path(__file__).resolve().parents[2])
        self._wait_healthy(log_path)

    def _wait_healthy(self, log_path) -> None:
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

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
