"""A `Policy` over SGLang's native HTTP API (the embedded server speaks the same subset).

Token-in/token-out: prompts are templated here into ids, sent as `input_ids`, and the reply's
`output_ids` and their logprobs come back; scoring sends exactly those ids again."""
from __future__ import annotations

import json

import requests

from agents.serving.chat import render_prompt_ids
from agents.serving.transformers_policy import SamplingConfig
from nextstate.types import Generation


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


class HTTPPolicy:
    name = "http"

    def __init__(self, url: str, tokenizer, sampling: SamplingConfig, *, model_name: str,
                 timeout_s: float = 600.0):
        self.url = url.rstrip("/")
        self.tokenizer = tokenizer
        self.sampling = sampling
        self.model_name = model_name
        self.timeout_s = timeout_s
        self._session = requests.Session()
        # one connection per episode in flight (parallel=16 on the chat env): the default pool of 10
        # drops and reopens the rest, with a warning per request
        self._session.mount("http://", requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=64))

    def _post(self, route: str, body: dict):
        try:
            r = self._session.post(self.url + route, json=body, timeout=self.timeout_s)
        except requests.RequestException as e:
            raise ServerError(f"{self.url}{route}: {e}") from e
        if r.status_code != 200:
            raise ServerError(f"{self.url}{route}: HTTP {r.status_code}: {r.text[:500]}")
        return r.json()

    def prompt_ids(self, messages, tools=None) -> list[int]:
        ids = render_prompt_ids(self.tokenizer, messages, tools)
        budget = self.sampling.max_prompt_tokens
        return ids if len(ids) <= budget else ids[-budget:]

    def generate(self, conversations, *, tools=None, seeds: list[int] | None = None,
                 sampling: SamplingConfig | None = None) -> list[Generation]:
        s = sampling or self.sampling
        prompts = [self.prompt_ids(m, tools) for m in conversations]
        return self.generate_from_ids(prompts, sampling=s, seeds=seeds)

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
                          seeds: list[int] | None = None) -> list[Generation]:
        body = {"input_ids": prompts, "return_logprob": True,
                "sampling_params": self._sampling_params(sampling or self.sampling, seeds)}
        outs = self._post("/generate", body)
        return [self._generation(p, o) for p, o in zip(prompts, outs)]

    def stream(self, messages, *, tools=None, sampling: SamplingConfig | None = None, seed: int | None = None):
        """One reply as it is sampled: yields (text so far, None) per token, then (text, the Generation)."""
        prompt = self.prompt_ids(messages, tools)
        sp = self._sampling_params(sampling or self.sampling)
        if seed is not None:
            sp["sampling_seed"] = int(seed)
        body = {"input_ids": prompt, "return_logprob": True, "stream": True, "sampling_params": sp}
        try:
            r = self._session.post(self.url + "/generate", json=body, timeout=self.timeout_s, stream=True)
        except requests.RequestException as e:
            raise ServerError(f"{self.url}/generate: {e}") from e
        with r:
            if r.status_code != 200:
                raise ServerError(f"{self.url}/generate: HTTP {r.status_code}: {r.text[:500]}")
            reply = StreamedReply()
            for line in r.iter_lines():
                if not line.startswith(b"data: ") or line == b"data: [DONE]":
                    continue
                chunk = json.loads(line[len(b"data: "):])
                if "error" in chunk:
                    raise ServerError(f"{self.url}/generate: {chunk['error'].get('message')}")
                reply.add(chunk)
                if reply.finish_reason is not None:
                    yield reply.text, reply.generation(prompt)
                    return
                yield reply.text, None
        raise ServerError(f"{self.url}/generate: the stream ended without a finished reply")

    def score_many(self, pairs: list[tuple[list[int], list[int]]], top_k: int = 0, chunk: int = 16):
        """log p(response | prompt) per response token for each (prompt_ids, response_ids) pair, as
        SGLang computes it: max_new_tokens 0, logprob_start_len at each response's start (a list, one
        per prompt, so `chunk` pairs go in one batched request). With top_k, also the top-k
        (logprob, id) pairs per position."""
        results = []
        for at in range(0, len(pairs), chunk):
            part = pairs[at: at + chunk]
            body = {"input_ids": [p + r for p, r in part], "return_logprob": True,
                    "logprob_start_len": [len(p) for p, _ in part],
                    "sampling_params": {"max_new_tokens": 0, "temperature": 1.0}}
            if top_k:
                body["top_logprobs_num"] = top_k
            for (_, resp), o in zip(part, self._post("/generate", body)):
                lps = [float(x[0]) for x in o["meta_info"]["input_token_logprobs"]]
                if len(lps) != len(resp):
                    raise ServerError(f"scoring returned {len(lps)} logprobs for {len(resp)} tokens")
                tops = o["meta_info"].get("input_top_logprobs") if top_k else None
                results.append((lps, [[(float(a), int(b)) for a, b, _ in row] for row in tops] if tops else None))
        return results

    def score(self, prompt_ids: list[int], response_ids: list[int]) -> list[float]:
        return self.score_many([(prompt_ids, response_ids)])[0][0]

    def update_weights_from_disk(self, path: str) -> dict:
        out = self._post("/update_weights_from_disk", {"model_path": str(path)})
        if not out.get("success"):
            raise ServerError(f"weight update failed: {out}")
        return out
