"""The learning signals a run may choose, keyed by `signal.name` (conf/signal/<name>.yaml).

A signal is a plain function from judged steps to training samples, registered with what it reads:
the judge's votes (`needs_judge`), the hinted teacher (`needs_hints`). The name picks the function,
so a run filed as `outcome` cannot train with OPD, and the loops ask the entry, not flags, whether
to start a judge or a teacher. Adding a signal: one module in this package that calls `register`,
and one YAML in conf/signal/ (docs/training.md, "Adding a signal", walks through one).
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Callable

from nextstate.types import Sample, Trajectory
from trainers.signals.steps import JudgedStep

BuildSamples = Callable[[object, list[JudgedStep], list[Trajectory]], list[Sample]]  # (SignalConfig, steps, trajs)


@dataclass(frozen=True)
class Signal:
    name: str
    build: BuildSamples
    needs_judge: bool  # reads step votes (PRM): the loops run the judge on every step
    needs_hints: bool  # reads the hinted teacher's log-probs (OPD): the loops run the hinter and teacher


_REGISTERED: dict[str, Signal] = {}


def register(name: str, *, needs_judge: bool, needs_hints: bool) -> Callable[[BuildSamples], BuildSamples]:
    """Decorator: `@register("prm", needs_judge=True, needs_hints=False)` above the build function."""
    def add(fn: BuildSamples) -> BuildSamples:
        if name in _REGISTERED and _REGISTERED[name].build is not fn:
            raise ValueError(f"two signals are registered as {name!r}")
        _REGISTERED[name] = Signal(name, fn, needs_judge, needs_hints)
        return fn

    return add


def signals() -> dict[str, Signal]:
    """Every registered signal, the paper's four first: each module of this package is imported once,
    and a signal's module registers it."""
    _import_package()
    return dict(sorted(_REGISTERED.items(), key=lambda kv: _ORDER.get(kv[0], len(_ORDER))))


@cache
def _import_package() -> None:
    for mod in pkgutil.iter_modules([str(Path(__file__).parent)]):
        importlib.import_module(f"{__package__}.{mod.name}")


_ORDER = {"outcome": 0, "prm": 1, "opd": 2, "prm_opd": 3}  # the paper's four first, in its order


def get_signal(name: str) -> Signal:
    known = signals()
    if name not in known:
        raise ValueError(f"signal.name must be one of {', '.join(known)}, got {name!r}")
    return known[name]
