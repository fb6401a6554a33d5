"""The policy version rollouts sample from, and the pause around a weight swap (the paper's proxy
answers 503 then). `Gate` is the in-process one (the proxy's own requests, tests); on Ray the gate
is an actor (`GateActor`) every rollout worker reaches through a `RemoteGate`, which behaves the same."""
from __future__ import annotations

import asyncio
import threading
import time


class Stopped(Exception):
    """Raised in a worker at its next episode once the loops are stopping."""


class Gate:
    """A gate in one process: `wait_open` holds a worker while the weights are swapped."""

    def __init__(self, version: int):
        self.version = version
        self._open = threading.Event()
        self._open.set()
        self._stopping = threading.Event()
        self.waited_s = 0.0  # rollout time spent held at the gate (summed over workers)
        self._lock = threading.Lock()

    def wait_open(self) -> int:
        """The current version, once no swap is under way; `Stopped` once the loops are stopping."""
        t0 = time.monotonic()
        while not self._open.wait(0.05):
            if self._stopping.is_set():
                raise Stopped
        if self._stopping.is_set():
            raise Stopped
        waited = time.monotonic() - t0
        if waited > 0.001:
            with self._lock:
                self.waited_s += waited
        return self.version

    def pause(self) -> None:
        self._open.clear()

    def resume(self, version: int) -> None:
        self.version = version
        self._open.set()

    def stop(self) -> None:
        self._stopping.set()
        self._open.set()

    @property
    def is_open(self) -> bool:
        """False while the served weights are being swapped (the proxy answers 503 then)."""
        return self._open.is_set() and not self._stopping.is_set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()


class GateActor:
    """The gate as a Ray actor (async: any number of workers wait at once without a thread each).
    Made an actor by `trainers.ray_loops`; plain here so this module does not import Ray."""

    def __init__(self, version: int):
        self.version = version
        self._open = asyncio.Event()
        self._open.set()
        self._stopping = False
        self.waited_s = 0.0

    async def wait_open(self) -> int | None:
        """The version once open; None once stopping."""
        t0 = time.monotonic()
        await self._open.wait()
        waited = time.monotonic() - t0
        if waited > 0.001:
            self.waited_s += waited
        return None if self._stopping else self.version

    async def pause(self) -> None:
        self._open.clear()

    async def resume(self, version: int) -> None:
        self.version = version
        self._open.set()

    async def stop(self) -> None:
        self._stopping = True
        self._open.set()

    async def state(self) -> tuple[bool, bool, int, float]:
        """(open, stopping, version, seconds workers were held)."""
        return self._open.is_set() and not self._stopping, self._stopping, self.version, self.waited_s


class RemoteGate:
    """What a rollout worker holds: the `Gate` interface over a `GateActor` (picklable: it is passed
    to every worker's `produce`)."""

    def __init__(self, actor):
        self.actor = actor

    def _state(self):
        import ray

        return ray.get(self.actor.state.remote())

    def wait_open(self) -> int:
        import ray

        version = ray.get(self.actor.wait_open.remote())
        if version is None:
            raise Stopped
        return version

    @property
    def is_open(self) -> bool:
        return self._state()[0]

    @property
    def stopping(self) -> bool:
        return self._state()[1]

    @property
    def version(self) -> int:
        return self._state()[2]
