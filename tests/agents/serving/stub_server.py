"""A stand-in serving endpoint for the client's routing tests: a tiny real HTTP server (http.server
in a thread) that answers SGLang's JSON shapes without a model. Each reply carries the server's
`tag` as its one output token, so a test sees which server answered."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class StubServer:
    def __init__(self, tag: int, *, delay_s: float = 0.0):
        self.tag = tag
        self.delay_s = delay_s  # before each /generate answer (a stuck server)
        self.gate = threading.Event()  # /generate waits for it; set = answer at once
        self.gate.set()
        self.requests: list[tuple[str, dict]] = []  # (route, body) as received
        self.weights: list[str] = []  # model paths pushed
        self.authorizations: list[str | None] = []  # each POST's Authorization header
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def kill(self) -> None:
        """Stop answering and close the port: new connections are refused, as after a crash."""
        self.httpd.shutdown()
        self.httpd.server_close()

    def generated(self) -> int:
        return sum(route == "/generate" for route, _ in self.requests)

    def output(self, ids: list[int], start: int | None) -> dict:
        meta = {"finish_reason": {"type": "length"}, "completion_tokens": 1,
                "output_token_logprobs": [[-0.5, self.tag, None]]}
        if start is not None:  # scoring: a logprob per token from the start on
            meta["input_token_logprobs"] = [[-1.0, t, None] for t in ids[start:]]
        return {"text": f"s{self.tag}", "output_ids": [self.tag], "meta_info": meta}


def _handler(stub: StubServer):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, status: int, obj) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._send(200, {}) if self.path == "/health" else self._send(404, {"error": {"message": "no route"}})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            stub.requests.append((self.path, body))
            stub.authorizations.append(self.headers.get("Authorization"))
            if self.path == "/update_weights_from_disk":
                stub.weights.append(body["model_path"])
                return self._send(200, {"success": True, "message": "loaded", "weight_version": len(stub.weights)})
            stub.gate.wait()
            time.sleep(stub.delay_s)
            ids = body["input_ids"]
            batch = ids if ids and isinstance(ids[0], list) else [ids]
            if any(t < 0 for row in batch for t in row):
                return self._send(400, {"error": {"message": "token ids must be non-negative"}})
            starts = body.get("logprob_start_len")
            starts = starts if isinstance(starts, list) else [starts] * len(batch)
            outs = [stub.output(row, s) for row, s in zip(batch, starts)]
            if body.get("stream"):
                return self._stream(outs[0])
            self._send(200, outs if batch is ids else outs[0])

        def _stream(self, out: dict) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.write(f"data: {json.dumps(out)}\n\ndata: [DONE]\n\n".encode())

    return Handler
