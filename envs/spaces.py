"""A free-text space: Gymnasium's `spaces.Text` only admits its charset (alphanumeric by default),
but observations and actions here are arbitrary text."""
from __future__ import annotations

import string

from gymnasium import spaces


class FreeText(spaces.Space[str]):
    def __init__(self, max_length: int = 1 << 20, seed: int | None = None):
        super().__init__(shape=None, dtype=None, seed=seed)
        self.max_length = max_length

    def contains(self, x) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def sample(self, mask=None, probability=None) -> str:
        alphabet = string.printable
        n = int(self.np_random.integers(0, 64))
        return "".join(alphabet[int(i)] for i in self.np_random.integers(0, len(alphabet), size=n))

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"FreeText(max_length={self.max_length})"

    def __eq__(self, other) -> bool:
        return isinstance(other, FreeText) and other.max_length == self.max_length


__all__ = ["FreeText"]
