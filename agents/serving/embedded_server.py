"""The embedded CPU server: the subset of SGLang's native HTTP API that the method needs, served by
the transformers backend with dynamic batching. The same client talks to it and to a real SGLang
server, so nothing above the client knows which one runs.

  POST /generate                  text | input_ids (one or a list), sampling_params, return_logprob,
                                  logprob_start_len, top_logprobs_num; max_new_tokens 0 = scoring;
                                  stream: true = server-sent events, one per token (one prompt)
  POST /update_weights_from_disk  {"model_path": dir}
  GET  /health, GET /get_model_info
  POST /v1/chat/completions       OpenAI-style chat (messages, tools, max_tokens, temperature ...)

Served by uvicorn behind `Guard` (agents/serving/asgi_guard.py): every route but /health requires
`Authorization: Bearer <key>` (401 otherwise, checked before the body is read) when the server has a
key: the first line of stdin with `--key-on-stdin` (how the harness hands over a random one: never on
the command line, which `ps` shows every user, nor in the environment, which /proc/<pid>/environ keeps),
else the environment variable NEXTSTATE_SERVER_API_KEY at start (for a server started by hand).

Fair generation (agents/serving/batcher.py): a long reply is preempted between decoding steps so short
ones are not held behind it; `max_new_tokens` is clamped to what the model's context leaves after the
prompt (a prompt that fills the context is a 400); every reply ends by `--request-deadline-s` after its
request came (finish reason "length").

Run: python -m agents.serving.embedded_server --model-path DIR --port 30000
"""
from __future__ import annotations

import argparse
import json
import math
import os
import queue
import sys
import time
import uuid

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from agents.serving.asgi_guard import Guard, Limits
from agents.serving.asgi_server import (
    BadBody,
    in_thread,
    iterate_in_thread,
    json_object,
    listening_socket,
    serve_forever,
    worker_pool,
)
from agents.serving.backend import KEY_ENV
from agents.serving.batcher import DEFAULT_DEADLINE_S, DEFAULT_PREEMPT_AFTER_S, GenerationBatcher
from agents.serving.chat import render_prompt_ids
from agents.serving.transformers_policy import SamplingConfig, TransformersPolicy, seed_of, stop_strings


class BadRequest(ValueError):
    pass


def _finite(sp: dict, key: str, default: float) -> float:
    value = sp.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{key} must be a finite number, got {value!r}")
    return float(value)


class Engine:
    """What the HTTP layer calls; also usable in-process."""

    def __init__(self, policy: TransformersPolicy, model_path: str, max_batch: int = 16,
                 deadline_s: float | None = DEFAULT_DEADLINE_S,
                 preempt_after_s: float | None = DEFAULT_PREEMPT_AFTER_S):
        self.policy = policy
        self.model_path = model_path
        self.batcher = GenerationBatcher(policy, max_batch=max_batch, deadline_s=deadline_s,
                                         quantum_s=preempt_after_s)
        self.weight_version = 0
        # prompt + reply must fit the model's positions: max_new_tokens beyond that is clamped
        self.context_tokens = int(getattr(policy.model.config, "max_position_embeddings", 0) or 2**31)

    def _sampling(self, sp: dict, prompt_len: int) -> SamplingConfig:
        """A prompt's sampling, its numbers checked; max_new_tokens clamped to what the context leaves."""
        try:
            max_new = sp.get("max_new_tokens", 128)
            if isinstance(max_new, float) and max_new.is_integer():
                max_new = int(max_new)
            if isinstance(max_new, bool) or not isinstance(max_new, int) or max_new < 0:
                raise ValueError(f"max_new_tokens must be an integer >= 0, got {max_new!r}")
            temperature, top_p = _finite(sp, "temperature", 1.0), _finite(sp, "top_p", 1.0)
            if temperature < 0 or not 0 < top_p <= 1:
                raise ValueError(f"temperature must be >= 0 and top_p in (0, 1], got {temperature}, {top_p}")
            room = self.context_tokens - prompt_len
            if max_new > 0 and room <= 0:
                raise ValueError(f"the prompt has {prompt_len} tokens: the model's context ({self.context_tokens}) "
                                 "leaves no room for a reply")
            return SamplingConfig(min(max_new, room), temperature, top_p, self.policy.sampling.max_prompt_tokens,
                                  bool(sp.get("ignore_eos", False)), stop_strings(sp.get("stop")))
        except (TypeError, ValueError, OverflowError) as e:
            raise BadRequest(f"bad sampling_params: {e}") from e

    def _request(self, body: dict):
        """(prompts, one prompt given?, samplings, seeds) of a /generate body, one sampling and seed
        per prompt."""
        if "input_ids" in body:
            ids = body["input_ids"]
        elif "text" in body:
            texts = body["text"]
            many = isinstance(texts, list)
            ids = [self.policy.tokenizer.encode(t, add_special_tokens=False) for t in (texts if many else [texts])]
            ids = ids if many else ids[0]
        else:
            raise BadRequest("give `text` or `input_ids`")
        single = bool(ids) and isinstance(ids[0], int)
        batch = [ids] if single else ids
        if not batch or not all(isinstance(x, list) and x and all(isinstance(t, int) for t in x) for x in batch):
            raise BadRequest("input_ids must be a non-empty list of ints (or a list of such lists)")
        sp = body.get("sampling_params") or {}
        per_prompt = sp if isinstance(sp, list) else [sp] * len(batch)  # SGLang: one dict, or one per prompt
        if len(per_prompt) != len(batch) or not all(isinstance(x, dict) for x in per_prompt):
            raise BadRequest(f"sampling_params: one object, or a list of {len(batch)} (one per prompt)")
        samplings = [self._sampling(x, len(p)) for x, p in zip(per_prompt, batch)]
        return batch, single, samplings, [self._seed(x) for x in per_prompt]

    @staticmethod
    def _seed(sp: dict) -> int | None:
        try:
            return seed_of(sp.get("sampling_seed", sp.get("seed")), "sampling_seed")
        except ValueError as e:
            raise BadRequest(str(e)) from None

    @staticmethod
    def _starts(start, n: int) -> list[int] | None:
        """`logprob_start_len` per prompt: one integer for all, or (as SGLang takes it) one per prompt
        of a batch, so a trainer scores many (prompt, response) pairs in one padded forward pass.
        None (or a negative start) asks for no input logprobs."""
        if start is None:
            return None
        if isinstance(start, list):
            if len(start) != n or not all(isinstance(x, int) and not isinstance(x, bool) for x in start):
                raise BadRequest(f"logprob_start_len: a list needs one integer per prompt ({n})")
            return start if all(x >= 0 for x in start) else None
        if not isinstance(start, int) or isinstance(start, bool):
            raise BadRequest("logprob_start_len must be an integer or a list of them")
        return [start] * n if start >= 0 else None

    def _meta(self, prompt: list[int], out_ids: list[int], finish: str | None) -> dict:
        return {"id": uuid.uuid4().hex, "prompt_tokens": len(prompt), "completion_tokens": len(out_ids),
                "weight_version": self.weight_version, "finish_reason": finish and {"type": finish}}

    def generate(self, body: dict):
        batch, single, samplings, seeds = self._request(body)
        want_lp = bool(body.get("return_logprob"))
        start = body.get("logprob_start_len", -1)
        top_k = int(body.get("top_logprobs_num") or 0)
        futures = [self.batcher.submit(p, s, seed) if s.max_new_tokens > 0 else None  # 0: scoring only
                   for p, s, seed in zip(batch, samplings, seeds)]
        outs = [([], [], "length") if f is None else f.result() for f in futures]
        starts = self._starts(start, len(batch))
        inputs = None
        if want_lp and starts is not None:
            with self.batcher.locked():
                inputs = self.policy.input_logprobs(batch, starts, top_k)
        results = []
        for i, (out_ids, out_lps, finish) in enumerate(outs):
            meta = self._meta(batch[i], out_ids, finish)
            if want_lp:
                meta["output_token_logprobs"] = [[lp, t, None] for lp, t in zip(out_lps, out_ids)]
                if inputs is not None:
                    lps, tops = inputs[i]
                    toks = batch[i][max(0, starts[i]):]
                    meta["input_token_logprobs"] = [[lp, t, None] for lp, t in zip(lps, toks)]
                    if top_k:
                        meta["input_top_logprobs"] = [[[lp, t, None] for lp, t in row] for row in tops]
            results.append({"text": self.policy.tokenizer.decode(out_ids, skip_special_tokens=True),
                            "output_ids": out_ids, "meta_info": meta})
        return results[0] if single else results

    def generate_stream(self, body: dict):
        """`/generate` with `stream: true`, as SGLang streams it: one chunk per sampled token, each with
        the text and ids so far, then a last chunk with the finish reason (and the output logprobs
        when asked). One prompt per request; its arguments are checked before the first chunk."""
        batch, single, samplings, seeds = self._request(body)
        if not single:
            raise BadRequest("stream one prompt at a time")
        return self._stream(batch[0], samplings[0], seeds[0], bool(body.get("return_logprob")))

    def _stream(self, prompt: list[int], sampling: SamplingConfig, seed: int | None, want_lp: bool):
        tokens: queue.Queue[int] = queue.Queue()
        future = self.batcher.submit(prompt, sampling, seed, on_token=tokens.put)
        decode = self.policy.tokenizer.decode
        so_far: list[int] = []
        while not (future.done() and tokens.empty()):
            try:
                so_far.append(tokens.get(timeout=0.05))
            except queue.Empty:
                continue
            yield {"text": decode(so_far, skip_special_tokens=True), "output_ids": list(so_far),
                   "meta_info": self._meta(prompt, so_far, None)}
        out_ids, out_lps, finish = future.result()
        meta = self._meta(prompt, out_ids, finish)
        if want_lp:
            meta["output_token_logprobs"] = [[lp, t, None] for lp, t in zip(out_lps, out_ids)]
        yield {"text": decode(out_ids, skip_special_tokens=True), "output_ids": out_ids, "meta_info": meta}

    def update_weights_from_disk(self, body: dict) -> dict:
        path = body.get("model_path")
        if not path:
            raise BadRequest("give `model_path`")
        t0 = time.monotonic()
        with self.batcher.drained():  # no reply is sampled from two versions of the weights
            self.policy.load_weights(path)
            self.model_path = path
            self.weight_version += 1
        return {"success": True, "message": f"loaded {path} in {time.monotonic() - t0:.2f}s",
                "weight_version": self.weight_version}

    def chat_completions(self, body: dict) -> dict:
        msgs = body.get("messages")
        if not isinstance(msgs, list) or not msgs:
            raise BadRequest("`messages` must be a non-empty list")
        prompt = self.policy._fit(render_prompt_ids(self.policy.tokenizer, msgs, body.get("tools")))
        sp = {"max_new_tokens": body.get("max_tokens", body.get("max_completion_tokens", 128)),
              "temperature": body.get("temperature", 1.0), "top_p": body.get("top_p", 1.0)}
        out = self.generate({"input_ids": prompt, "sampling_params": {**sp, "seed": body.get("seed")},
                             "return_logprob": bool(body.get("logprobs"))})
        choice = {"index": 0, "message": {"role": "assistant", "content": out["text"]},
                  "finish_reason": out["meta_info"]["finish_reason"]["type"]}
        if body.get("logprobs"):
            choice["logprobs"] = {"content": [{"token": self.policy.tokenizer.decode([t]), "logprob": lp}
                                              for lp, t, _ in out["meta_info"]["output_token_logprobs"]]}
        return {"id": "chatcmpl-" + out["meta_info"]["id"], "object": "chat.completion",
                "created": int(time.time()), "model": body.get("model", self.policy.model_name),
                "choices": [choice],
                "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(out["output_ids"]),
                          "total_tokens": len(prompt) + len(out["output_ids"])}}


def make_app(engine: Engine, api_key: str = "", limits: Limits | None = None):
    """The HTTP routes of `engine` (starlette), behind `Guard`: with `api_key`, all but /health require it
    (constant-time, before the body is read); bodies and requests in flight bounded by `limits`."""
    limits = limits or Limits()
    pool = worker_pool(limits, "embedded-request")
    routes_post = {"/generate": engine.generate, "/update_weights_from_disk": engine.update_weights_from_disk,
                   "/v1/chat/completions": engine.chat_completions}

    def error(status: int, message: str) -> JSONResponse:
        return JSONResponse({"error": {"message": message}}, status)

    async def health(request: Request):
        return JSONResponse({"status": "ok"})

    async def model_info(request: Request):
        pc = engine.policy.prefix_cache
        return JSONResponse({"model_path": engine.model_path, "weight_version": engine.weight_version,
                             "is_generation": True, "context_tokens": engine.context_tokens,
                             "prefix_cache": None if pc is None else {
                                 "hit_tokens": pc.hit_tokens, "miss_tokens": pc.miss_tokens,
                                 "entries": len(pc), "tokens": pc.tokens, "max_tokens": pc.max_tokens}})

    def call(route: str, raw: bytes):
        """(status, JSON reply or a stream of chunks) of one POST, run in a worker thread."""
        try:
            body = json_object(raw)
            if route == "/generate" and body.get("stream"):
                return 200, engine.generate_stream(body)
            return 200, routes_post[route](body)
        except (BadBody, BadRequest) as e:
            return 400, {"error": {"message": str(e)}}
        except Exception as e:  # the server stays up; the caller learns what broke
            return 500, {"error": {"message": f"{type(e).__name__}: {e}"}}

    async def post(request: Request):
        status, out = await in_thread(pool, call, request.url.path, await request.body())
        if isinstance(out, (dict, list)):
            return JSONResponse(out, status)
        return StreamingResponse(_events(iterate_in_thread(pool, out)), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    async def no_route(request: Request, exc):
        return error(exc.status_code, f"no route {request.method} {request.url.path}")

    app = Starlette(routes=[Route("/health", health), Route("/get_model_info", model_info),
                            *(Route(path, post, methods=["POST"]) for path in routes_post)],
                    exception_handlers={404: no_route, 405: no_route})
    return Guard(app, api_key=api_key, limits=limits)


async def _events(chunks):
    """Server-sent events, one per chunk, then `[DONE]`; an error after the headers is the last event.
    A client that leaves stops the stream (the rest of its reply is still sampled, then dropped)."""
    try:
        async for chunk in chunks:
            yield f"data: {json.dumps(chunk)}\n\n".encode()
    except Exception as e:
        yield f"data: {json.dumps({'error': {'message': f'{type(e).__name__}: {e}'}})}\n\n".encode()
    yield b"data: [DONE]\n\n"


def _exit_with_parent(pid: int) -> None:
    """A server launched by the harness must not outlive it (even after a kill -9)."""
    import os
    import threading

    def watch():
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                os._exit(0)
            time.sleep(1.0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-path", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=30000)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--max-batch", type=int, default=16)
    ap.add_argument("--prefix-cache-tokens", type=int, default=32768,
                    help="KV of recent prompts kept for reuse of shared prefixes, in tokens (0 = off)")
    ap.add_argument("--max-prompt-tokens", type=int, default=4096)
    ap.add_argument("--model-name", default="embedded")
    ap.add_argument("--parent-pid", type=int, default=None, help="exit when this process is gone")
    ap.add_argument("--request-deadline-s", type=float, default=DEFAULT_DEADLINE_S,
                    help="a reply ends (finish reason 'length') this long after its request came; 0 = never")
    ap.add_argument("--preempt-after-s", type=float, default=DEFAULT_PREEMPT_AFTER_S,
                    help="a batch runs this long before requests waiting behind it may preempt it; 0 = never")
    ap.add_argument("--max-in-flight", type=int, default=256, help="requests served at once; more get 503")
    ap.add_argument("--max-body-bytes", type=int, default=64 * 2**20, help="bigger request bodies get 413")
    ap.add_argument("--key-on-stdin", action="store_true", help="read the API key from stdin's first line")
    a = ap.parse_args(argv)
    api_key = os.environ.pop(KEY_ENV, "")  # out of the environment: nothing this process starts inherits it
    if a.key_on_stdin:
        api_key = sys.stdin.readline().strip()
    if a.parent_pid:
        _exit_with_parent(a.parent_pid)
    policy = TransformersPolicy.load(a.model_path, SamplingConfig(128, 1.0, 1.0, a.max_prompt_tokens),
                                     model_name=a.model_name, dtype=a.dtype, threads=a.threads)
    policy.enable_prefix_cache(a.prefix_cache_tokens)
    # the proxy's sessions and the rollouts' episodes are served at once: a burst must queue, not be
    # refused (HTTPPolicy drops a server it cannot reach from its rotation); the harness's clients keep
    # their connections open between requests, so the idle timeout is long
    limits = Limits(max_body_bytes=a.max_body_bytes, max_in_flight=a.max_in_flight, idle_timeout_s=300.0)
    sock = listening_socket(a.host, a.port, limits.backlog)
    engine = Engine(policy, a.model_path, a.max_batch, a.request_deadline_s or None, a.preempt_after_s or None)
    print(f"[embedded-server] ready on http://{a.host}:{a.port} ({'keyed' if api_key else 'no key'})", flush=True)
    serve_forever(make_app(engine, api_key, limits), sock, limits)


if __name__ == "__main__":
    main()
