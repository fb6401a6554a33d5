"""An agent behind any OpenAI-compatible `/v1/chat/completions` endpoint (vLLM, SGLang, llama.cpp,
Ollama, a hosted API, this project's embedded server or proxy), for evaluation on every env.

The env's tools go as the API's `tools`; the reply's `tool_calls` come back as the `<tool_call>` blocks
the envs read, so a model that calls tools natively and one that writes the blocks as text are graded
alike. Requests are limited to `concurrency` at a time per endpoint (shared by every episode of the
run), retried with exponential backoff on 429, 5xx and connection errors, and bounded by `timeout_s`.
The key is read from the environment variable `api_key_env`, never from the config (configs are
recorded in run dirs). Training needs token ids and logprobs of the policy's own tokenizer: it runs on
the token-level backends (`agent=model`), not on this one."""
from __future__ import annotations

import json
import os
import random
import threading
import time

import requests

from nextstate.types import Generation, Task

RETRIED_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class AgentUnavailable(RuntimeError):
    """The endpoint did not answer usefully after every retry: the episode is filed as an infra failure
    (unscored), never as the agent's failure."""


class OpenAIAgent:
    name = "openai"
    _slots: dict[str, threading.BoundedSemaphore] = {}
    _slots_lock = threading.Lock()

    def __init__(self, base_url: str, model: str, api_key_env: str = "OPENAI_API_KEY", max_tokens: int = 512,
                 temperature: float = 0.0, timeout_s: float = 120.0, max_retries: int = 4,
                 backoff_s: float = 1.0, concurrency: int = 8, seed: int | None = None, **_):
        if not base_url or not model:
            raise ValueError("agent=openai needs agent.base_url (e.g. http://127.0.0.1:8000/v1) and agent.model")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.max_tokens, self.temperature = model, max_tokens, temperature
        self.timeout_s, self.max_retries, self.backoff_s = timeout_s, max_retries, backoff_s
        self.seed = seed
        key = os.environ.get(api_key_env, "") if api_key_env else ""
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        with OpenAIAgent._slots_lock:
            self._slot = OpenAIAgent._slots.setdefault(self.url, threading.BoundedSemaphore(max(1, concurrency)))

    def __repr__(self) -> str:  # the key stays out of logs
        return f"OpenAIAgent({self.url!r}, model={self.model!r})"

    def begin(self, task: Task, reference_actions: list[str]) -> None:
        pass

    def act(self, messages, tools=None) -> Generation:
        body = {"model": self.model, "messages": [m for m in messages if m["role"] != "system" or m["content"]],
                "max_tokens": self.max_tokens, "temperature": self.temperature}
        if tools:
            body["tools"] = tools
        if self.seed is not None:
            body["seed"] = self.seed
        data = self._post(body)
        try:
            choice = data["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError) as e:
            raise AgentUnavailable(f"{self.url} answered without a choice: {str(data)[:300]}") from e
        usage = data.get("usage") or {}
        return Generation(text=reply_text(message), token_ids=[], logprobs=[],
                          finish_reason=choice.get("finish_reason") or "stop",
                          usage={k: int(usage[k]) for k in ("prompt_tokens", "completion_tokens")
                                 if isinstance(usage.get(k), int)})

    def _post(self, body: dict) -> dict:
        last = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1) * (1 + random.random()))
            try:
                with self._slot:
                    r = requests.post(self.url, json=body, headers=self._headers, timeout=self.timeout_s)
            except requests.RequestException as e:
                last = f"{type(e).__name__}: {e}"
                continue
            if r.status_code in RETRIED_STATUS:
                last = f"HTTP {r.status_code}: {r.text[:300]}"
                continue
            if r.status_code != 200:  # a 400 / 401 / 404 will not change on a retry
                raise AgentUnavailable(f"{self.url} refused the request: HTTP {r.status_code}: {r.text[:300]}")
            try:
                return r.json()
            except ValueError:
                last = f"not JSON: {r.text[:300]}"
        raise AgentUnavailable(f"{self.url} failed {self.max_retries + 1} times; last: {last}")


def reply_text(message: dict) -> str:
    """The reply as the envs read it: the text, then each native tool call as a `<tool_call>` block
    (arguments that are not valid JSON are passed on as written: the env says what is wrong)."""
    parts = [message.get("content") or ""]
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        raw = fn.get("arguments")
        try:
            args = json.loads(raw) if isinstance(raw, str) else (raw or {})
            body = json.dumps({"name": fn.get("name"), "arguments": args}, ensure_ascii=False)
        except ValueError:
            body = f'{{"name": {json.dumps(fn.get("name"))}, "arguments": {raw}}}'
        parts.append(f"<tool_call>\n{body}\n</tool_call>")
    return "\n".join(p for p in parts if p)
