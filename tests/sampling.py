"""A test over a whole suite: a spread of its members runs in `make test`, every member in `make test-slow`."""
from typing import Callable

import pytest


def spread(items: list, ids: Callable[[object], str], fast: int = 4) -> list:
    """`items` as pytest params (a tuple is one param's values): `fast` of them, evenly spread over the
    list, in the fast selection; the others marked slow (`make test` still tries every kind of member)."""
    step = max(1, -(-len(items) // fast))
    return [pytest.param(*(x if isinstance(x, tuple) else (x,)), id=ids(x),
                         marks=() if i % step == 0 else pytest.mark.slow)
            for i, x in enumerate(items)]
