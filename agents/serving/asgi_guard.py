"""What every server here checks before its app sees a request (an ASGI middleware, `Guard`): the key,
the body's size, how long the body takes to arrive, and how many requests are in flight. The proxy
(trainers/proxy/http.py) and the embedded policy server (agents/serving/embedded_server.py) both sit
behind it, so neither reads an unauthenticated or oversized body into memory.

In this order, each refusal answered at once and the connection closed (its body is never read):
- headers over `max_head_bytes` together (431: h11 bounds only a head that arrives in pieces);
- the key: with one set, every path but the open ones (/health) needs `Authorization: Bearer <key>`,
  compared in constant time (401);
- `Content-Length` over `max_body_bytes` (413); a malformed one is refused by h11 itself (400);
- more than `max_in_flight` requests being served (503 with Retry-After: the client comes back);
- then the body is read here, whole: a chunked body is counted as it comes and cut at the limit (413),
  and one that does not arrive within `body_timeout_s` (a client lying about its length) gets 408.
The app then gets the body as one message; its `receive` after that still reports a disconnect.
"""
from __future__ import annotations

import asyncio
import hmac
import json
from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """A server's bounds on what one request may hold of it (conf/mode/proxy.yaml, conf/backend/*.yaml)."""
    max_body_bytes: int = 8 * 2**20  # a long agent history with tools is a few hundred KB
    max_head_bytes: int = 32 * 2**10  # the request's headers together (h11 holds an incomplete head to 16 KB)
    max_in_flight: int = 64  # requests being served at once (streams included); more get 503 + Retry-After
    body_timeout_s: float = 30.0  # the whole body must arrive within this, once the head is in
    idle_timeout_s: float = 75.0  # a connection's next request head must be complete within this
    backlog: int = 1024  # connections the kernel queues before the server accepts them
    retry_after_s: int = 1


class _Refused(Exception):
    def __init__(self, status: int, message: str, kind: str):
        super().__init__(message)
        self.status, self.kind = status, kind


async def send_json(send, status: int, obj: dict, headers: dict[str, str] | None = None, *,
                    close: bool = False) -> None:
    """One JSON response on a raw ASGI `send`; `close` ends the connection after it (a body left unread
    in it would otherwise be parsed as the next request)."""
    data = json.dumps(obj).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    if close:
        raw.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": data})


def error_body(message: str, kind: str) -> dict:
    """OpenAI's error shape (SGLang's too): what clients of both servers read."""
    return {"error": {"message": message, "type": kind}}


class Guard:
    """`Guard(app, api_key=..., limits=...)`: the checks above, then `app` with the body read."""

    def __init__(self, app, *, api_key: str = "", limits: Limits | None = None,
                 open_paths: tuple[str, ...] = ("/health",)):
        self.app, self.limits, self.open_paths = app, limits or Limits(), open_paths
        self._expected = f"Bearer {api_key}".encode() if api_key else b""
        self.in_flight = 0  # one event loop: no lock needed

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["path"] in self.open_paths:
            return await self.app(scope, receive, send)
        try:
            self._check_head(scope["headers"])
        except _Refused as e:
            return await self._refuse(send, e)
        self.in_flight += 1
        try:
            body = await self._read_body(receive)
        except _Refused as e:
            self.in_flight -= 1
            return await self._refuse(send, e)
        try:
            await self.app(scope, _replay(body, receive), send)
        finally:
            self.in_flight -= 1

    def _check_head(self, raw: list[tuple[bytes, bytes]]) -> None:
        if sum(len(k) + len(v) for k, v in raw) > self.limits.max_head_bytes:
            raise _Refused(431, f"the request's headers are over {self.limits.max_head_bytes} bytes",
                           "request_too_large")
        headers = dict(raw)
        if self._expected and not hmac.compare_digest(headers.get(b"authorization", b""), self._expected):
            raise _Refused(401, "a valid API key is needed: send `Authorization: Bearer <key>`", "invalid_api_key")
        length = headers.get(b"content-length")
        if length is not None and b"transfer-encoding" in headers:  # behind a proxy that frames by length: smuggling
            raise _Refused(400, "a request with both Content-Length and Transfer-Encoding is ambiguous (RFC 9112, "
                                "6.1); it is refused and the connection closed", "invalid_request_error")
        if length is not None and int(length) > self.limits.max_body_bytes:  # h11 has checked it is digits
            raise _Refused(413, f"the body is {int(length)} bytes; this server takes at most "
                                f"{self.limits.max_body_bytes}", "request_too_large")
        if self.in_flight >= self.limits.max_in_flight:
            raise _Refused(503, f"{self.in_flight} requests are being served, the most this server takes at once; "
                                "retry after Retry-After seconds", "overloaded")

    async def _read_body(self, receive) -> bytes:
        """The whole body, counted as it comes (chunked bodies have no length to check up front)."""
        parts, size = [], 0
        deadline = asyncio.get_running_loop().time() + self.limits.body_timeout_s
        while True:
            left = deadline - asyncio.get_running_loop().time()
            try:
                message = await asyncio.wait_for(receive(), max(left, 0.001))
            except TimeoutError:
                raise _Refused(408, f"the request body did not arrive within {self.limits.body_timeout_s:g}s",
                               "timeout") from None
            if message["type"] == "http.disconnect":
                raise _Refused(400, "the client left before sending its body", "invalid_request_error")
            size += len(message.get("body", b""))
            if size > self.limits.max_body_bytes:
                raise _Refused(413, f"the body is over {self.limits.max_body_bytes} bytes", "request_too_large")
            parts.append(message.get("body", b""))
            if not message.get("more_body"):
                return b"".join(parts)

    async def _refuse(self, send, e: _Refused) -> None:
        headers = {"Retry-After": str(self.limits.retry_after_s)} if e.status == 503 else {}
        await send_json(send, e.status, error_body(str(e), e.kind), headers, close=True)


def _replay(body: bytes, receive):
    """A `receive` that gives the app the body read, then passes on to the connection (a disconnect)."""
    given = False

    async def replay():
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
