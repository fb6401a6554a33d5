"""Reuse of the KV cache of earlier prompts for their longest common token prefix.

On CPU, prefill is most of the cost of an agent step: every step re-sends the system prompt, the tool
schemas (700-1900 tokens in the tool-call env) and the whole episode so far, and a GRPO group sends
the same prompt `group_size` times. SGLang's RadixAttention keeps that KV; this is the same idea for
the embedded server, with a linear scan instead of a radix tree (a few dozen entries at most).

KV at a position depends only on the tokens up to it, so any stored prompt that agrees with a new one
on its first L tokens gives the new prompt's first L positions. Entries hold per-layer (heads, T, dim)
key/value tensors of one prompt; the cache is bounded by the total number of tokens it holds (least
recently used goes first) and must be cleared whenever the weights change.
"""
from __future__ import annotations

from collections import OrderedDict

import torch

KV = list[tuple[torch.Tensor, torch.Tensor]]  # per layer: keys, values of shape (heads, T, dim)


def common_prefix_len(a: torch.Tensor, b: torch.Tensor) -> int:
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = (a[:n] != b[:n]).nonzero()
    return int(diff[0]) if len(diff) else n


class PrefixCache:
    def __init__(self, max_tokens: int):
        self.max_tokens = max_tokens
        self._entries: OrderedDict[tuple[int, ...], tuple[torch.Tensor, KV]] = OrderedDict()
        self._tokens = 0
        self.hit_tokens = 0    # prompt tokens served from the cache (for logs and benchmarks)
        self.miss_tokens = 0   # prompt tokens that had to be computed

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, ids: list[int]) -> bool:
        return tuple(ids) in self._entries

    @property
    def tokens(self) -> int:
        return self._tokens

    def match(self, ids: list[int], limit: int | None = None) -> tuple[int, KV | None]:
        """The longest prefix of `ids` held, as (length, per-layer KV sliced to it), at most `limit`
        tokens. At least the last token is left out: its logits are what the caller needs next."""
        if not self._entries or len(ids) < 2:
            return 0, None
        query = torch.tensor(ids)
        best_len, best_key = 0, None
        for key, (stored, _) in self._entries.items():
            n = common_prefix_len(stored, query)
            if n > best_len:
                best_len, best_key = n, key
        best_len = min(best_len, len(ids) - 1, len(ids) if limit is None else limit)
        if best_key is None or best_len == 0:
            return 0, None
        self._entries.move_to_end(best_key)
        _, kv = self._entries[best_key]
        return best_len, [(k[:, :best_len], v[:, :best_len]) for k, v in kv]

    def put(self, ids: list[int], kv: KV) -> None:
        """Store the KV of a whole prompt (tensors the caller no longer mutates)."""
        key = tuple(ids)
        if len(ids) > self.max_tokens:
            return
        if key in self._entries:
            self._entries.move_to_end(key)
            return
        new = torch.tensor(ids)
        for old in [k for k, (stored, _) in self._entries.items()  # covered by the new entry: the next
                    if len(stored) <= len(new) and common_prefix_len(stored, new) == len(stored)]:  # step's prompt
            self._tokens -= len(self._entries.pop(old)[0])
        self._entries[key] = (new, kv)
        self._tokens += len(ids)
        while self._tokens > self.max_tokens:
            _, (stored, _) = self._entries.popitem(last=False)
            self._tokens -= len(stored)

    def record(self, hit: int, miss: int) -> None:
        self.hit_tokens += hit
        self.miss_tokens += miss

    def clear(self) -> None:
        self._entries.clear()
        self._tokens = 0
