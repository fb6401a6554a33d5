"""Running an ASGI app (behind `Guard`, agents/serving/asgi_guard.py) on uvicorn, the way both servers
here need it: on a socket bound and listening before the server starts (the port is known at once,
`port=0` takes a free one, and connections queue in a backlog of `Limits.backlog` while it starts), in a
background thread (the proxy lives inside a Ray actor) or in the foreground (the embedded server's
process); and the glue from the apps' blocking work (a model's generation) to the event loop.

uvicorn closes an idle keep-alive connection after `timeout_keep_alive`, but arms that timer only after
a response: a connection that never completes its first request head would be held forever
(slowloris). `_HeadDeadline` gives every request head, the first one included, `idle_timeout_s` to
arrive whole; h11 caps a head's size (16 KB by default).
"""
from __future__ import annotations

import asyncio
import json
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import AsyncIterator, Callable, Iterator

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from agents.serving.asgi_guard import Limits

GRACEFUL_S = 2.0  # on shutdown, requests in flight get this long (a generation would hold it for minutes)


class _HeadDeadline(H11Protocol):
    """uvicorn's h11 protocol, with a deadline on each request head (see the module's docstring)."""

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._head_timer = None
        self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()

    def connection_lost(self, exc) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
        self._head_timer = self.loop.call_later(self.timeout_keep_alive, self._head_overdue)

    def _head_overdue(self) -> None:
        waiting_for_a_head = self.cycle is None or self.cycle.response_complete
        if waiting_for_a_head and not self.transport.is_closing():
            self.transport.close()


def listening_socket(host: str, port: int, backlog: int) -> socket.socket:
    """A socket bound to (host, port) and listening; OSError when the address is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    return sock


def _server(app, limits: Limits) -> uvicorn.Server:
    config = uvicorn.Config(app, http=_HeadDeadline, lifespan="off", log_config=None, log_level="warning",
                            access_log=False, timeout_keep_alive=int(limits.idle_timeout_s), backlog=limits.backlog,
                            timeout_graceful_shutdown=GRACEFUL_S)
    return uvicorn.Server(config)


class ServerThread:
    """`app` served on `sock` from a daemon thread until `close()`."""

    def __init__(self, app, sock: socket.socket, limits: Limits, name: str = "http"):
        self.sock, self.port = sock, sock.getsockname()[1]
        self._server = _server(app, limits)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, name=name, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)
        self.sock.close()


def serve_forever(app, sock: socket.socket, limits: Limits) -> None:
    """`app` on `sock` in this thread, until SIGINT or SIGTERM."""
    _server(app, limits).run(sockets=[sock])


def worker_pool(limits: Limits, name: str) -> ThreadPoolExecutor:
    """Threads for the apps' blocking work, one per request that may be in flight (plus a few for the
    open routes): anyio's default of 40 would queue the 41st generation behind the others."""
    return ThreadPoolExecutor(limits.max_in_flight + 4, thread_name_prefix=name)


async def in_thread(pool: ThreadPoolExecutor, fn: Callable, *args):
    return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)


_END = object()


def iterate_in_thread(pool: ThreadPoolExecutor, items: Iterator) -> AsyncIterator:
    """A blocking iterator (a reply's events, each waiting on the model) as an async one. The iterator
    runs in one pool thread from now on and is closed there once it ends or the async side stops (a
    client that left): closing it from another thread while it waits for its next item would fail."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()
    stop = threading.Event()

    def put(item) -> None:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, item)
        except RuntimeError:  # the loop is gone (server shutdown)
            stop.set()

    def pump() -> None:
        try:
            for item in items:
                if stop.is_set():
                    break
                put(item)
        except BaseException as e:  # the async side raises it
            put(_Raised(e))
        finally:
            try:
                items.close()
            finally:
                put(_END)

    pool.submit(pump)

    async def drain():
        try:
            while (item := await queue.get()) is not _END:
                if isinstance(item, _Raised):
                    raise item.error
                yield item
        finally:
            stop.set()

    return drain()


class _Raised:
    def __init__(self, error: BaseException):
        self.error = error


class BadBody(ValueError):
    """A body that is not the JSON object a route takes (a 400 with this message)."""


def json_object(raw: bytes) -> dict:
    """The body as a JSON object (an empty body is `{}`)."""
    try:
        body = json.loads(raw or b"{}")
    except RecursionError:
        raise BadBody("the body nests too deeply to read") from None
    except (UnicodeDecodeError, ValueError) as e:
        raise BadBody(f"the body is not JSON: {e}") from None
    if not isinstance(body, dict):
        raise BadBody("the body must be a JSON object")
    return body
