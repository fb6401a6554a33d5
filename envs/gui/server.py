"""The local web server the GUI tasks are served from: static files on a loopback port, in a
thread of this process.

Why not a sandbox container: the containers run with `network_mode: none`, so a browser outside
could not reach a server inside; and the apps keep no server-side state (state lives in the page
and its storage, isolated by a fresh browser context per episode), so a container would add
start-up time and isolate nothing that matters. Pages are served over http:// rather than file://
so that they behave as web pages do (origin, storage, relative URLs).

Mounts: `/miniwob/...` -> the `miniwob` wheel's html/ directory (so MiniWoB's own relative paths
`../core/core.js` resolve), `/apps/...` -> the bundled apps (envs/tasks/gui).
"""
from __future__ import annotations

import functools
import posixpath
import threading
import urllib.parse
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class _Handler(SimpleHTTPRequestHandler):
    mounts: dict[str, Path] = {}

    def translate_path(self, path: str) -> str:
        path = urllib.parse.unquote(path.split("?", 1)[0].split("#", 1)[0])
        parts = [p for p in posixpath.normpath(path).split("/") if p and p not in (".", "..")]
        if not parts or parts[0] not in self.mounts:
            return "/nonexistent"
        return str(self.mounts[parts[0]].joinpath(*parts[1:]))

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, format, *args) -> None:  # noqa: A002  (quiet: one line per file is noise)
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        """A browser that closes a context mid-load drops its connections: not worth a traceback."""


class StaticServer:
    """`with StaticServer({"apps": path}) as s: s.url("apps", "todo/index.html")`."""

    def __init__(self, mounts: dict[str, Path]):
        handler = type("Handler", (_Handler,), {"mounts": {k: Path(v) for k, v in mounts.items()}})
        self._httpd = _Server(("127.0.0.1", 0), functools.partial(handler))
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="nextstate-gui-server",
                                        daemon=True)
        self._thread.start()
        self.origin = f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def url(self, mount: str, path: str) -> str:
        return f"{self.origin}/{mount}/{path.lstrip('/')}"

    def close(self) -> None:
        if self._thread.is_alive():
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(timeout=5)

    def __enter__(self) -> "StaticServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
