"""agent=openai: any OpenAI-compatible chat endpoint as the agent. Retries, refusals and native tool
calls against a small real HTTP server on loopback; whole eval runs against the embedded server's
`/v1/chat/completions` (a real OpenAI-compatible server with the default model)."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agents.openai_agent import AgentUnavailable, OpenAIAgent, reply_text

ROOT = Path(__file__).resolve().parents[2]


class Scripted(BaseHTTPRequestHandler):
    """Answers each POST with the next (status, body) of the server's script."""

    def do_POST(self):  # noqa: N802
        length = int(self.headers.get("Content-Length", 0))
        self.server.requests.append((json.loads(self.rfile.read(length)), dict(self.headers)))
        status, body = self.server.script.pop(0)
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def scripted():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    server.script, server.requests = [], []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


def _agent(server, **kw) -> OpenAIAgent:
    return OpenAIAgent(f"http://127.0.0.1:{server.server_port}/v1", "m", backoff_s=0.01, **kw)


def _answer(message: dict, usage=None) -> dict:
    return {"choices": [{"message": message, "finish_reason": "stop"}], "usage": usage or {}}


def test_busy_and_failing_answers_are_retried_then_the_reply_comes_back(scripted, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "k-123")
    scripted.script = [(429, {"error": "slow down"}), (503, {"error": "busy"}),
                       (200, _answer({"content": "42"}, {"prompt_tokens": 7, "completion_tokens": 2}))]
    gen = _agent(scripted).act([{"role": "system", "content": ""}, {"role": "user", "content": "6 x 7?"}])
    assert gen.text == "42" and gen.usage == {"prompt_tokens": 7, "completion_tokens": 2}
    assert len(scripted.requests) == 3
    body, headers = scripted.requests[-1]
    assert body["messages"] == [{"role": "user", "content": "6 x 7?"}]  # an empty system prompt is left out
    assert headers["Authorization"] == "Bearer k-123"


def test_a_refusal_is_not_retried_and_names_the_status(scripted):
    scripted.script = [(401, {"error": "bad key"})]
    with pytest.raises(AgentUnavailable, match="HTTP 401"):
        _agent(scripted).act([{"role": "user", "content": "hi"}])
    assert len(scripted.requests) == 1


def test_an_endpoint_that_keeps_failing_gives_up_after_the_retries(scripted):
    scripted.script = [(500, {"error": "down"})] * 3
    with pytest.raises(AgentUnavailable, match="failed 3 times"):
        _agent(scripted, max_retries=2).act([{"role": "user", "content": "hi"}])


def test_native_tool_calls_become_the_blocks_the_envs_read():
    text = reply_text({"content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "convert", "arguments": '{"value": 3}'}},
        {"id": "c2", "type": "function", "function": {"name": "lookup_city", "arguments": "{oops"}}]})
    assert text == ('<tool_call>\n{"name": "convert", "arguments": {"value": 3}}\n</tool_call>\n'
                    '<tool_call>\n{"name": "lookup_city", "arguments": {oops}\n</tool_call>')


def test_the_tools_go_as_the_api_field(scripted):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    scripted.script = [(200, _answer({"content": "ok"}))]
    _agent(scripted).act([{"role": "user", "content": "hi"}], tools=tools)
    assert scripted.requests[0][0]["tools"] == tools


def _eval(served, tmp_path, *overrides) -> tuple[subprocess.CompletedProcess, list[dict]]:
    env = {**os.environ, "NEXTSTATE_TEST_KEY": served._api_key}
    p = subprocess.run([sys.executable, "-m", "harness.run", "agent=openai", f"agent.base_url={served.url}/v1",
                        "agent.model=smollm2", "agent.api_key_env=NEXTSTATE_TEST_KEY", "agent.max_tokens=64",
                        f"paths.results_dir={tmp_path}", "progress=false", *overrides],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    board = tmp_path / "leaderboard.csv"
    return p, list(csv.DictReader(board.open())) if board.exists() else []


@pytest.mark.slow
@pytest.mark.model
def test_agent_openai_evaluates_tool_call_tasks_through_the_embedded_server(served, tmp_path):
    p, rows = _eval(served, tmp_path, "env=toolcall", "env.suite=templated", "limit=3")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert len(rows) == 1 and rows[0]["agent"] == "openai" and rows[0]["model"] == "smollm2"
    assert rows[0]["infra_failures"] == "0" and int(rows[0]["tokens"]) > 0


@pytest.mark.model
@pytest.mark.docker
@pytest.mark.slow  # ~70 s: a sandbox, the server and a whole run
def test_agent_openai_evaluates_a_terminal_task_through_the_embedded_server(served, tmp_path, terminal_image):
    p, rows = _eval(served, tmp_path, "env=terminal", "limit=1")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert len(rows) == 1 and rows[0]["env"] == "terminal" and rows[0]["infra_failures"] == "0"
    assert int(rows[0]["tokens"]) > 0
