"""The proxy's HTTP face: an ASGI app (starlette) with the routes /health, /v1/models and
/v1/chat/completions, behind `Guard` (agents/serving/asgi_guard.py: the key, the body's size and
arrival, requests in flight, all before the body is read), served by uvicorn (`serve`). JSON bodies,
server-sent event streams and errors in OpenAI's shape. What a request means is the Proxy's business
(trainers/proxy/server.py); its blocking work runs in a pool of threads, one per request in flight."""
from __future__ import annotations

import json
from typing import AsyncIterator, Protocol

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from agents.serving.asgi_guard import Guard, Limits, error_body
from agents.serving.asgi_server import (
    BadBody,
    ServerThread,
    in_thread,
    iterate_in_thread,
    json_object,
    listening_socket,
    worker_pool,
)


class ChatService(Protocol):
    """What the app serves (the Proxy): a reply to a chat request, counters, its key."""

    model_name: str
    api_key: str

    def chat(self, body: dict, headers) -> tuple: ...

    def stats(self) -> dict: ...


def openai_error(message: str, kind: str = "invalid_request_error") -> dict:
    return error_body(message, kind)


async def _guarded_events(events: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Once the headers are out, an error can only be the stream's last event."""
    try:
        async for event in events:
            yield event
    except Exception as e:
        error = openai_error(f"{type(e).__name__}: {e}", "server_error")
        yield f"data: {json.dumps(error)}\n\ndata: [DONE]\n\n".encode()


def make_app(proxy: ChatService, limits: Limits | None = None):
    """The proxy's ASGI app, guarded with `proxy.api_key`."""
    limits = limits or Limits()
    pool = worker_pool(limits, "proxy-request")

    async def health(request: Request):  # open to liveness probes; counters only
        return JSONResponse({"status": "ok", **proxy.stats()})

    async def models(request: Request):
        return JSONResponse({"object": "list", "data": [{"id": proxy.model_name, "object": "model"}]})

    def chat(raw: bytes, headers) -> tuple:
        try:
            body = json_object(raw)
        except BadBody as e:
            return 400, openai_error(str(e)), {}
        try:
            return proxy.chat(body, headers)
        except Exception as e:  # the proxy stays up; the client learns what broke
            return 500, openai_error(f"{type(e).__name__}: {e}", "server_error"), {}

    async def completions(request: Request):
        status, out, headers = await in_thread(pool, chat, await request.body(), request.headers)
        if isinstance(out, dict):
            return JSONResponse(out, status, headers)
        return StreamingResponse(_guarded_events(iterate_in_thread(pool, out)), status, headers)

    async def no_route(request: Request, exc):
        return JSONResponse(openai_error(f"no route {request.method} {request.url.path}"), exc.status_code)

    app = Starlette(routes=[Route("/health", health), Route("/v1/models", models),
                            Route("/v1/chat/completions", completions, methods=["POST"]),
                            Route("/v1/chat/completions/", completions, methods=["POST"])],
                    exception_handlers={404: no_route, 405: no_route})
    return Guard(app, api_key=proxy.api_key, limits=limits)


def serve(proxy: ChatService, host: str, port: int, limits: Limits | None = None) -> ServerThread:
    """The proxy served from a background thread on (host, port); `.port` is the one bound (port 0: a
    free one), `.close()` stops it. OSError when the address is taken."""
    limits = limits or Limits()
    return ServerThread(make_app(proxy, limits), listening_socket(host, port, limits.backlog), limits, "proxy-http")
