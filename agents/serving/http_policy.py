"""A `Policy` over SGLang's native HTTP API (the embedded server speaks the same subset), on one
serving endpoint or several of the same model.

Token-in/token-out: prompts are templated here into ids, sent as `input_ids`, and the reply's
`output_ids` and their logprobs come back; scoring sends exactly those ids again.

With several endpoints each request goes to one of them (`Balancer`: least in flight, a session
sticks to its server). A server that cannot be reached or does not answer in time leaves the
rotation and the request goes to another; an HTTP error is the request's fault and is raised.

`api_key` (the servers' key, see agents/serving/backend.py) goes with every request as
`Authorization: Bearer <key>`; it is never printed (not in a repr, an error or a log line)."""
from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import requests

from agents.serving.balancer import Balancer
from agents.serving.chat import render_prompt_ids
from agents.serving.transformers_policy import SamplingConfig
from nextstate.types import Generation

CONNECT_TIMEOUT_S = 10.0  # a server that does not take the connection in this long is gone
# failures that say the server is gone or stuck, not that the request was wrong
UNREACHABLE = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError)


class ServerError(RuntimeError):
    pass


def _output_logprobs(meta: dict) -> list[float]:
    """The sampled tokens' logprobs of a `/generate` output (`[logprob, token_id, text]` each)."""
    return [float(x[0]) for x in meta.get("output_token_logprobs") or []]


class StreamedReply:
    """One reply put together from `/generate`'s stream events, in either of SGLang's two ways of
    streaming: by default each event holds the reply so far (text, ids, logprobs); a server started
    with `--incremental-streaming-output` sends only what is new in each. Each event's
    `meta_info.completion_tokens` counts the tokens so far, which tells the two apart event by event
    (a first event is the same either way). Reading only the last event of an incremental stream
    would train on the reply's last token alone."""

    def __init__(self):
        self.text = ""
        self.token_ids: list[int] = []
        self.logprobs: list[float] = []
        self.finish_reason: str | None = None

    def add(self, event: dict) -> None:
        meta = event["meta_info"]
        ids = list(event["output_ids"])
        so_far = meta.get("completion_tokens")
        lps = _output_logprobs(meta)
        if so_far is None or len(ids) >= so_far:  # the whole reply so far
            self.text, self.token_ids = event.get("text") or "", ids
            if lps or meta.get("finish_reason"):
                self.logprobs = lps
        else:  # only what is new
            if len(self.token_ids) + len(ids) != so_far:
                raise ServerError(f"a streamed event brings {len(ids)} tokens to {len(self.token_ids)}, "
                                  f"but the server counts {so_far}: events were lost")
            self.text += event.get("text") or ""
            self.token_ids += ids
            self.logprobs += lps
        if meta.get("finish_reason"):
            self.finish_reason = meta["finish_reason"]["type"]

    def generation(self, prompt: list[int]) -> Generation:
        return Generation(text=self.text, token_ids=self.token_ids, logprobs=self.logprobs,
                          prompt_token_ids=prompt, finish_reason=self.finish_reason)


def _reason(e: Exception) -> str:
    return f"{type(e).__name__}: {e}"


class HTTPPolicy:
    """`HTTPPolicy(url_or_urls, tokenizer, sampling, model_name=...)`. The keyword `session` of the
    request methods pins a conversation to one server (its prefix cache keeps the conversation)."""

    name = "http"

    def __init__(self, urls: str | Sequence[str], tokenizer, sampling: SamplingConfig, *, model_name: str,
                 model_path: str | None = None, timeout_s: float = 600.0, api_key: str = ""):
        self.balancer = Balancer([urls] if isinstance(urls, str) else list(urls))
        self.tokenizer = tokenizer
        self.sampling = sampling
        self.model_name = model_name
        self.model_path = None if model_path is None else str(model_path)
        self.timeout_s = timeout_s
        self._session = requests.Session()
        # one connection per episode in flight (parallel=16 on the chat env): the default pool of 10
        # drops and reopens the rest, with a warning per request
        self._session.mount("http://", requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=64))
        self._api_key = api_key
        self._session.headers.update(self.headers)

    @property
    def headers(self) -> dict[str, str]:
        """What every request carries to the servers (their key, when they take one): for direct calls."""
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    @property
    def url(self) -> str:
        """The first live server (the first one given when none is left): for logs and direct calls."""
        return (self.balancer.live or self.balancer.urls)[0]

    @property
    def live_urls(self) -> list[str]:
        return self.balancer.live

    @property
    def dropped(self) -> dict[str, str]:
        """url -> why it left the rotation."""
        return dict(self.balancer.dropped)

    def endpoints(self) -> Endpoints:
        """What another process needs to rebuild this policy on the same live servers (`.connect()`)."""
        if self.model_path is None:
            raise ValueError("this HTTPPolicy was made without model_path=, so another process cannot load "
                             "its tokenizer; serve_policy passes it")
        return Endpoints(self.live_urls, self.model_path, self.model_name, self.sampling, self._api_key)

    def _send(self, url: str, route: str, body: dict, **kw) -> requests.Response:
        return self._session.post(url + route, json=body, timeout=(min(CONNECT_TIMEOUT_S, self.timeout_s),
                                                                   self.timeout_s), **kw)

    def _none_left(self, route: str) -> ServerError:
        why = "; ".join(f"{u} ({r})" for u, r in self.balancer.dropped.items())
        return ServerError(f"{route}: no serving endpoint left; dropped: {why}")

    def _post(self, route: str, body: dict, session: str | None = None):
        while True:
            with self.balancer.lease(session) as url:
                if url is None:
                    raise self._none_left(route)
                try:
                    r = self._send(url, route, body)
                except UNREACHABLE as e:
                    self.balancer.drop(url, _reason(e))
                    continue  # on another server
                except requests.RequestException as e:
                    raise ServerError(f"{url}{route}: {e}") from e
            if r.status_code != 200:
                raise ServerError(f"{url}{route}: HTTP {r.status_code}: {r.text[:500]}")
            return r.json()

    def prompt_ids(self, messages, tools=None) -> list[int]:
        ids = render_prompt_ids(self.tokenizer, messages, tools)
        budget = self.sampling.max_prompt_tokens
        return ids if len(ids) <= budget else ids[-budget:]

    def generate(self, conversations, *, tools=None, seeds: list[int] | None = None,
                 sampling: SamplingConfig | None = None, session: str | None = None) -> list[Generation]:
        s = sampling or self.sampling
        prompts = [self.prompt_ids(m, tools) for m in conversations]
        return self.generate_from_ids(prompts, sampling=s, seeds=seeds, session=session)

    @staticmethod
    def _sampling_params(s: SamplingConfig, seeds: list[int | None] | None = None) -> dict | list[dict]:
        """SGLang's `sampling_params`: one object, or with seeds one per prompt (its `sampling_seed`
        is a single integer)."""
        sp = {"max_new_tokens": s.max_new_tokens, "temperature": s.temperature, "top_p": s.top_p}
        if s.stop:  # SGLang's name too
            sp["stop"] = list(s.stop)
        if seeds is None:
            return sp
        return [sp if seed is None else {**sp, "sampling_seed": int(seed)} for seed in seeds]

    @staticmethod
    def _generation(prompt: list[int], o: dict) -> Generation:
        return Generation(text=o["text"], token_ids=list(o["output_ids"]), logprobs=_output_logprobs(o["meta_info"]),
                          prompt_token_ids=prompt, finish_reason=o["meta_info"]["finish_reason"]["type"])

    def generate_from_ids(self, prompts: list[list[int]], *, sampling: SamplingConfig | None = None,
                          seeds: list[int] | None = None, session: str | None = None) -> list[Generation]:
        body = {"input_ids": prompts, "return_logprob": True,
                "sampling_params": self._sampling_params(sampling or self.sampling, seeds)}
        outs = self._post("/generate", body, session)
        return [self._generation(p, o) for p, o in zip(prompts, outs)]

    def stream(self, messages, *, tools=None, sampling: SamplingConfig | None = None, seed: int | None = None,
               session: str | None = None):
        """One reply as it is sampled: yields (text so far, None) per token, then (text, the Generation)."""
        yield from self.stream_from_ids(self.prompt_ids(messages, tools), sampling=sampling, seed=seed,
                                        session=session)

    def stream_from_ids(self, prompt: list[int], *, sampling: SamplingConfig | None = None,
                        seed: int | None = None, session: str | None = None):
        """`stream` on a templated prompt. A server lost before its first event is replaced by another;
        one lost mid-reply raises ServerError (the caller has shown part of a reply that a new server
        would sample differently)."""
        sp = self._sampling_params(sampling or self.sampling)
        if seed is not None:
            sp["sampling_seed"] = int(seed)
        body = {"input_ids": prompt, "return_logprob": True, "stream": True, "sampling_params": sp}
        while True:
            with self.balancer.lease(session) as url:
                if url is None:
                    raise self._none_left("/generate")
                started = False
                try:
                    with self._send(url, "/generate", body, stream=True) as r:
                        for event in self._read_stream(url, r, prompt):
                            started = True
                            yield event
                    return
                except UNREACHABLE as e:
                    self.balancer.drop(url, _reason(e))
                    if started:
                        raise ServerError(f"{url}/generate: the stream was cut mid-reply: {_reason(e)}") from e
                except requests.RequestException as e:
                    raise ServerError(f"{url}/generate: {e}") from e

    @staticmethod
    def _read_stream(url: str, r: requests.Response, prompt: list[int]):
        if r.status_code != 200:
            raise ServerError(f"{url}/generate: HTTP {r.status_code}: {r.text[:500]}")
        reply = StreamedReply()
        for line in r.iter_lines():
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            chunk = json.loads(line[len(b"data: "):])
            if "error" in chunk:
                raise ServerError(f"{url}/generate: {chunk['error'].get('message')}")
            reply.add(chunk)
            if reply.finish_reason is not None:
                yield reply.text, reply.generation(prompt)
                return
            yield reply.text, None
        raise ServerError(f"{url}/generate: the stream ended without a finished reply")

    def score_many(self, pairs: list[tuple[list[int], list[int]]], top_k: int = 0, chunk: int = 16, *,
                   session: str | None = None):
        """log p(response | prompt) per response token for each (prompt_ids, response_ids) pair, as
        SGLang computes it: max_new_tokens 0, logprob_start_len at each response's start (a list, one
        per prompt, so `chunk` pairs go in one batched request). With top_k, also the top-k
        (logprob, id) pairs per position. Without a session each chunk goes to the least busy server."""
        results = []
        for at in range(0, len(pairs), chunk):
            part = pairs[at: at + chunk]
            body = {"input_ids": [p + r for p, r in part], "return_logprob": True,
                    "logprob_start_len": [len(p) for p, _ in part],
                    "sampling_params": {"max_new_tokens": 0, "temperature": 1.0}}
            if top_k:
                body["top_logprobs_num"] = top_k
            for (_, resp), o in zip(part, self._post("/generate", body, session)):
                lps = [float(x[0]) for x in o["meta_info"]["input_token_logprobs"]]
                if len(lps) != len(resp):
                    raise ServerError(f"scoring returned {len(lps)} logprobs for {len(resp)} tokens")
                tops = o["meta_info"].get("input_top_logprobs") if top_k else None
                results.append((lps, [[(float(a), int(b)) for a, b, _ in row] for row in tops] if tops else None))
        return results

    def score(self, prompt_ids: list[int], response_ids: list[int]) -> list[float]:
        return self.score_many([(prompt_ids, response_ids)])[0][0]

    def update_weights_from_disk(self, path: str) -> dict:
        """Load the weights at `path` on every live server (at once, one thread each) before returning,
        so no rollout after it samples from the old weights. A server that cannot be reached leaves the
        rotation; one that answers with an error raises. Returns the first live server's reply."""
        body = {"model_path": str(path)}
        urls = self.live_urls
        if not urls:
            raise self._none_left("/update_weights_from_disk")
        with ThreadPoolExecutor(len(urls), thread_name_prefix="weight-push") as pool:
            replies = [out for out in pool.map(lambda u: self._push_weights(u, body), urls) if out is not None]
        if not replies:
            raise self._none_left("/update_weights_from_disk")
        return replies[0]

    def _push_weights(self, url: str, body: dict) -> dict | None:
        route = "/update_weights_from_disk"
        try:
            r = self._send(url, route, body)
        except UNREACHABLE as e:
            self.balancer.drop(url, _reason(e))
            return None
        except requests.RequestException as e:
            raise ServerError(f"{url}{route}: {e}") from e
        if r.status_code != 200:
            raise ServerError(f"{url}{route}: HTTP {r.status_code}: {r.text[:500]}")
        out = r.json()
        if not out.get("success"):
            raise ServerError(f"{url}: weight update failed: {out}")
        return out


@dataclass(frozen=True)
class Endpoints:
    """A policy's servers as plain, picklable values: a Ray actor or a worker process gets this and
    calls `.connect()` for its own HTTPPolicy (its own connections, balancer and tokenizer)."""

    urls: list[str]
    model_path: str
    model_name: str
    sampling: SamplingConfig
    api_key: str = field(default="", repr=False)  # travels pickled to the actor; never in a repr

    def connect(self, *, timeout_s: float = 600.0) -> HTTPPolicy:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(self.model_path)
        return HTTPPolicy(list(self.urls), tokenizer, self.sampling, model_name=self.model_name,
                          model_path=self.model_path, timeout_s=timeout_s, api_key=self.api_key)
