"""Dynamic batching, fair to short requests: callers on many threads submit prompts; one worker thread
runs them as batches. On a CPU a batch of 16 costs little more than a batch of 1 per step (generation
is memory-bound at small batch), so concurrent episodes share the model almost for free.

No request holds the model for long while others wait (without preemption, one request with
max_tokens=10^9 at temperature 0 would stall every client). A batch runs until it is done or, once it
has run `quantum_s` while other requests wait, is preempted between two decoding steps: its unfinished
rows go to the back of the line with what they have sampled so far, and the next batch is made of the oldest waiting
requests, new ones and preempted ones alike. A preempted row carries on where it stopped: its
prompt plus its tokens so far are prefilled again (the prefix cache keeps most of that), and a seeded
row keeps drawing from its own generator. Requests with different max_new_tokens share a batch, each
with its own limit. Each request also has a deadline (`deadline_s` after it was submitted): past it, it
ends with what it has and finish reason "length", like a reply cut at max_tokens.

Weight updates wait for the replies in progress to finish (`drained`): no reply is sampled from two
versions of the weights; the deadline bounds that wait."""
from __future__ import annotations

import queue
import threading
import time
from collections import deque
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Callable

import torch

from agents.serving.transformers_policy import SamplingConfig, TransformersPolicy

DEFAULT_DEADLINE_S = 300.0  # conf/backend/embedded.yaml sets it for launched servers
DEFAULT_PREEMPT_AFTER_S = 2.0  # and this one


@dataclass
class _Request:
    prompt_ids: list[int]
    sampling: SamplingConfig
    generator: torch.Generator | None  # a seeded request's own, kept from one batch to the next
    future: Future
    on_token: Callable[[int], None] | None  # each token as it is sampled (streaming)
    deadline: float  # time.monotonic() after which it ends with what it has
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)

    @property
    def left(self) -> int:
        return self.sampling.max_new_tokens - len(self.tokens)

    def finish(self, reason: str) -> None:
        self.future.set_result((self.tokens, self.logprobs, reason))


class GenerationBatcher:
    def __init__(self, policy: TransformersPolicy, max_batch: int = 16, wait_s: float = 0.02,
                 quantum_s: float | None = DEFAULT_PREEMPT_AFTER_S, deadline_s: float | None = DEFAULT_DEADLINE_S):
        """`quantum_s`: how long a batch runs before requests waiting behind it may preempt it (longer
        than a short reply's batch takes here: 32 sessions of 16-token replies, proxy_load.py, had the
        same throughput with 0.5 s but a worse p95, 32.6 s against 27.2 s without preemption; None:
        never, as a reproducible server needs: a preempted row's prefill again differs in the last bits);
        `deadline_s`: a request's time from submission to its reply, at most (None: no deadline)."""
        self.policy = policy
        self.max_batch = max_batch
        self.wait_s = wait_s
        self.quantum_s = quantum_s
        self.deadline_s = deadline_s
        self._queue: queue.Queue[_Request | None] = queue.Queue()
        self._lock = threading.Lock()  # model access (generation vs weight updates / scoring)
        self._idle = threading.Condition()  # `drained` waits on it for the replies in progress
        self._started = 0  # requests taken from the queue and not finished
        self._draining = 0
        self._worker = threading.Thread(target=self._loop, name="generation-batcher", daemon=True)
        self._worker.start()

    def submit(self, prompt_ids: list[int], sampling: SamplingConfig, seed: int | None = None,
               on_token: Callable[[int], None] | None = None) -> Future:
        """The request's (token ids, logprobs, finish reason), later; `on_token` hears each token as it
        is sampled (called on the batch's thread: keep it quick)."""
        fut: Future = Future()
        generator = None if seed is None else torch.Generator().manual_seed(int(seed))
        deadline = time.monotonic() + (self.deadline_s if self.deadline_s is not None else float("inf"))
        self._queue.put(_Request(list(prompt_ids), sampling, generator, fut, on_token, deadline))
        return fut

    def locked(self):
        """Hold this to use the model outside the batcher (scoring)."""
        return self._lock

    @contextmanager
    def drained(self):
        """The model, with no reply in progress (a weight update); new requests wait until it is released."""
        with self._idle:
            self._draining += 1
            self._idle.wait_for(lambda: self._started == 0)
        try:
            with self._lock:
                yield
        finally:
            with self._idle:
                self._draining -= 1
                self._idle.notify_all()

    def close(self) -> None:
        self._queue.put(None)
        self._worker.join(timeout=10)

    # -- the worker --------------------------------------------------------------------------------
    def _loop(self) -> None:
        line: deque[_Request] = deque()  # started requests, oldest first
        while True:
            if not line:
                first = self._queue.get()
                if first is None:
                    return
                with self._idle:  # a weight update in progress goes first
                    self._idle.wait_for(lambda: not self._draining)
                line.append(first)
                if not self._gather(line, self.wait_s):
                    return
            elif not self._draining and not self._gather(line, 0.0):
                return
            with self._idle:
                self._started = len(line)
            batch = [line.popleft() for _ in range(min(len(line), self.max_batch))]
            groups: dict[SamplingConfig, list[_Request]] = {}
            for r in batch:  # one sampling per batch; each row keeps its own max_new_tokens
                groups.setdefault(replace(r.sampling, max_new_tokens=0), []).append(r)
            for n, reqs in enumerate(groups.values()):
                line.extend(self._run(reqs, others_waiting=bool(line) or n + 1 < len(groups)))
            with self._idle:
                self._started = len(line)
                self._idle.notify_all()

    def _gather(self, line: deque, wait_s: float) -> bool:
        """Add what was submitted to the line, waiting up to `wait_s` between arrivals while a batch
        fills; False once closed."""
        try:
            while not (wait_s and len(line) >= self.max_batch):
                nxt = self._queue.get(timeout=wait_s) if wait_s else self._queue.get_nowait()
                if nxt is None:
                    return False
                line.append(nxt)
        except queue.Empty:
            pass
        return True

    def _run(self, reqs: list[_Request], others_waiting: bool) -> list[_Request]:
        """One batch until done or preempted; the requests not yet finished."""
        now = time.monotonic()
        for r in reqs:
            if r.deadline <= now:
                r.finish("length")
        reqs = [r for r in reqs if not r.future.done()]
        if not reqs:
            return []
        t0, first_deadline = now, min(r.deadline for r in reqs)

        def preempt() -> bool:
            t = time.monotonic()
            return t >= first_deadline or (self.quantum_s is not None and t - t0 >= self.quantum_s
                                           and (others_waiting or not self._queue.empty()))

        listeners = [r.on_token for r in reqs]
        on_token = None if not any(listeners) else (
            lambda row, token: listeners[row] is not None and listeners[row](token))
        try:
            with self._lock:
                outs = self.policy.sample_ids([r.prompt_ids + r.tokens for r in reqs], reqs[0].sampling,
                                              [r.generator for r in reqs], on_token=on_token,
                                              limits=[r.left for r in reqs], preempt=preempt)
        except BaseException as e:  # a failed batch fails its callers, not the worker
            for r in reqs:
                r.future.set_exception(e)
            return []
        unfinished, now = [], time.monotonic()
        for r, (ids, lps, reason) in zip(reqs, outs):
            r.tokens += ids
            r.logprobs += lps
            if reason is not None:
                r.finish(reason)
            elif r.deadline <= now:
                r.finish("length")
            else:
                unfinished.append(r)
        return unfinished
