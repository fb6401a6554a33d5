"""Dynamic batching: callers on many threads submit prompts; one worker thread runs them as one
batch. On a CPU a batch of 16 costs little more than a batch of 1 per step (generation is memory-bound
at small batch), so concurrent episodes share the model almost for free."""
from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Callable

from agents.serving.transformers_policy import SamplingConfig, TransformersPolicy


@dataclass
class _Request:
    prompt_ids: list[int]
    sampling: SamplingConfig
    seed: int | None
    future: Future
    on_token: Callable[[int], None] | None = None  # each token as it is sampled (streaming)


class GenerationBatcher:
    def __init__(self, policy: TransformersPolicy, max_batch: int = 16, wait_s: float = 0.02):
        self.policy = policy
        self.max_batch = max_batch
        self.wait_s = wait_s
        self._queue: queue.Queue[_Request | None] = queue.Queue()
        self._lock = threading.Lock()  # model access (generation vs weight updates / scoring)
        self._worker = threading.Thread(target=self._loop, name="generation-batcher", daemon=True)
        self._worker.start()

    def submit(self, prompt_ids: list[int], sampling: SamplingConfig, seed: int | None = None,
               on_token: Callable[[int], None] | None = None) -> Future:
        """The request's (token ids, logprobs, finish reason), later; `on_token` hears each token as it
        is sampled (called on the batch's thread: keep it quick)."""
        fut: Future = Future()
        self._queue.put(_Request(prompt_ids, sampling, seed, fut, on_token))
        return fut

    def locked(self):
        """Hold this to use the model outside the batcher (scoring, weight updates)."""
        return self._lock

    def close(self) -> None:
        self._queue.put(None)
        self._worker.join(timeout=10)

    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            try:  # gather what arrives within a few ms, up to max_batch
                while len(batch) < self.max_batch:
                    nxt = self._queue.get(timeout=self.wait_s)
                    if nxt is None:
                        self._queue.put(None)
                        break
                    batch.append(nxt)
            except queue.Empty:
                pass
            groups: dict[SamplingConfig, list[_Request]] = {}
            for r in batch:
                groups.setdefault(r.sampling, []).append(r)
            for sampling, reqs in groups.items():
                try:
                    listeners = [r.on_token for r in reqs]
                    on_token = None if not any(listeners) else (  # B023: it is called within this iteration
                        lambda row, token: listeners[row] is not None and listeners[row](token))  # noqa: B023
                    with self._lock:
                        outs = self.policy.sample_ids([r.prompt_ids for r in reqs], sampling,
                                                      [r.seed for r in reqs], on_token=on_token)
                    for r, out in zip(reqs, outs):
                        r.future.set_result(out)
                except BaseException as e:  # a failed batch fails its callers, not the worker
                    for r in reqs:
                        if not r.future.done():
                            r.future.set_exception(e)
