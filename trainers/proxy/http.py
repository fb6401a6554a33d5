"""The proxy's HTTP face: routes (/health, /v1/models, /v1/chat/completions), the API key check, JSON
bodies and server-sent event streams, and errors in OpenAI's shape. What a request means is the
Proxy's business (trainers/proxy/server.py)."""
from __future__ import annotations

import json
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Iterator, Protocol


class ChatService(Protocol):
    """What the handler serves (the Proxy): a reply to a chat request, counters, the key check."""

    model_name: str

    def chat(self, body: dict, headers) -> tuple: ...

    def stats(self) -> dict: ...

    def authorized(self, headers) -> bool: ...


def openai_error(message: str, kind: str = "invalid_request_error") -> dict:
    return {"error": {"message": message, "type": kind}}


def make_handler(proxy: ChatService):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _send(self, status: int, obj, headers: dict | None = None) -> None:
            """A JSON body, or server-sent events as they come (the connection closes after them)."""
            headers = {"Content-Type": "application/json", **(headers or {})}
            if not isinstance(obj, dict):
                return self._send_events(status, obj, headers)
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _refuse_unauthorized(self) -> bool:
            if proxy.authorized(self.headers):
                return False
            self._send(401, openai_error("a valid API key is needed: send `Authorization: Bearer <key>`",
                                         "invalid_api_key"))
            return True

        def _send_events(self, status: int, events: Iterator[bytes], headers: dict) -> None:
            self.send_response(status)
            for k, v in {**headers, "Connection": "close"}.items():
                self.send_header(k, v)
            self.end_headers()
            self.close_connection = True
            try:
                for event in events:
                    self.wfile.write(event)
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client left; its reply is not recorded
            except Exception as e:  # headers are out: the error is the last event
                error = openai_error(f"{type(e).__name__}: {e}", "server_error")
                self.wfile.write(f"data: {json.dumps(error)}\n\ndata: [DONE]\n\n".encode())
            finally:
                events.close()  # stops the policy's stream too

        def do_GET(self):
            if self.path == "/health":  # open to liveness probes; counters only
                self._send(200, {"status": "ok", **proxy.stats()})
            elif self._refuse_unauthorized():
                return
            elif self.path == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": proxy.model_name, "object": "model"}]})
            else:
                self._send(404, openai_error(f"no route GET {self.path}"))

        def do_POST(self):
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if length < 0:  # rfile.read(-1) would wait for a close that never comes
                self.close_connection = True
                return self._send(400, openai_error("Content-Length must be a non-negative integer"))
            raw = self.rfile.read(length)  # read first: the connection is reused
            if self._refuse_unauthorized():
                return
            if self.path.rstrip("/") != "/v1/chat/completions":
                return self._send(404, openai_error(f"no route POST {self.path}"))
            try:
                body = json.loads(raw or b"{}")
            except (json.JSONDecodeError, ValueError) as e:
                return self._send(400, openai_error(f"the body is not JSON: {e}"))
            except RecursionError:
                return self._send(400, openai_error("the body nests too deeply to read"))
            try:
                self._send(*proxy.chat(body, self.headers))
            except Exception as e:  # the proxy stays up; the client learns what broke
                self._send(HTTPStatus.INTERNAL_SERVER_ERROR, openai_error(f"{type(e).__name__}: {e}", "server_error"))

    return Handler
