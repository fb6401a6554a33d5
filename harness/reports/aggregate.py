"""The one aggregation every report uses: a method's name, runs grouped by configuration and seed, the
mean over seeds with its 95% t-interval, and the difference to the outcome-reward baseline paired seed
by seed (the same tasks, the same initial eval: pairing removes the seed's share of the variance, which
is why a paired delta can be significant where two overlapping intervals are not)."""
from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import TypeVar

BASELINE_SIGNAL = "outcome"  # the paper's baseline: outcome reward only (GRPO)
SIGNAL_ORDER = ("outcome", "prm", "opd", "prm_opd", "sft")
NONE = "-"  # a method field that does not apply (no judge read, synchronous training, ...)

# Two-sided 95% Student t quantiles by degrees of freedom; above 30 the next lower tabulated df is
# used (a slightly wider, conservative interval). Tabulated rather than computed: no scipy here.
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
        10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110,
        18: 2.101, 19: 2.093, 20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060,
        26: 2.056, 27: 2.052, 28: 2.048, 29: 2.045, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980}

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


def t95(df: int) -> float:
    if df < 1:
        raise ValueError("a t interval needs at least two values")
    return _T95[max(k for k in _T95 if k <= df)]


@dataclass(frozen=True)
class Stat:
    """Mean of n values and the half-width of its 95% t-interval (None for a single value)."""

    mean: float
    half: float | None
    n: int

    @classmethod
    def of(cls, values: Iterable[float]) -> "Stat":
        values = list(values)
        n = len(values)
        mean = statistics.fmean(values)
        half = t95(n - 1) * statistics.stdev(values) / math.sqrt(n) if n > 1 else None
        return cls(mean, half, n)

    @classmethod
    def of_any(cls, values: Iterable[float]) -> "Stat | None":
        """The Stat of the values, None where there are none."""
        values = list(values)
        return cls.of(values) if values else None


def mean(xs: Iterable[float | None]) -> float | None:
    """The mean of the values that are there; None where none is."""
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


def feedback(judge: str, hints: str) -> str:
    """Which feedback a method learned from, given the judge and hints it read ("-" for one it did
    not read): `model` (a model judged or extracted hints: `model`, `model_task`), `oracle` (the env's
    ground truth or the user's own verdict) or `-` (none: outcome reward)."""
    used = [x for x in (judge, hints) if x not in (NONE, "")]
    if not used:
        return NONE
    return "model" if any(x.startswith("model") for x in used) else "oracle"


@dataclass(frozen=True)
class Method:
    """How a run learned: the one name every report gives a method. `judge`, `hints` and `teacher`
    are what the signal read (`-` where it read none); `mode` is `async` for mode=async training,
    whose runs pair only with async outcome runs."""

    signal: str
    judge: str = NONE
    hints: str = NONE
    teacher: str = NONE
    mode: str = NONE

    @classmethod
    def of_metrics(cls, m: dict) -> "Method":
        """A run's method from its metrics.json (or a leaderboard row: the same keys)."""
        get = lambda k: (str(m.get(k) or NONE)).strip() or NONE  # noqa: E731
        mode = get("mode")
        return cls(get("signal"), get("judge"), get("hints"), get("teacher"), NONE if mode == "train" else mode)

    @property
    def label(self) -> str:
        """The signal, then what it read and how it trained, e.g. `prm (judge=oracle, mode=async)`."""
        return self._label(("judge", "hints", "teacher", "mode"))

    def _label(self, fields: Iterable[str]) -> str:
        extra = [f"{k}={getattr(self, k)}" for k in fields if getattr(self, k) not in (NONE, "")]
        return self.signal + (f" ({', '.join(extra)})" if extra else "")

    @property
    def feedback(self) -> str:
        return feedback(self.judge, self.hints)

    @property
    def is_baseline(self) -> bool:
        return self.signal == BASELINE_SIGNAL


def labels(methods: Iterable[Method]) -> dict[Method, str]:
    """Labels for methods shown side by side (a sweep's table and plot): `label` less what they share,
    so a sweep over signals reads `outcome`, `prm`, ... and one over modes `prm`, `prm (mode=async)`. A
    judge, hints or teacher is named where two methods read different ones; the mode where it varies."""
    methods = set(methods)
    used = {k: {getattr(m, k) for m in methods} - {NONE, ""} for k in ("judge", "hints", "teacher")}
    fields = [k for k, vs in used.items() if len(vs) > 1]
    fields += ["mode"] if len({m.mode for m in methods}) > 1 else []
    out = {m: m._label(fields) for m in methods}
    return out if len(set(out.values())) == len(out) else {m: m.label for m in methods}


def signal_rank(signal: str) -> int:
    """Where a signal goes in a table: the baseline first, then the paper's order (a `+top20`-style
    suffix keeps its signal's place), anything else last."""
    base = signal.split("+")[0].split()[0] if signal else ""
    return SIGNAL_ORDER.index(base) if base in SIGNAL_ORDER else len(SIGNAL_ORDER)


def by_seed(items: Iterable[T], key: Callable[[T], K], seed: Callable[[T], int],
            on_repeat: Callable[[K, int, T, T], None] | None = None) -> dict[K, dict[int, T]]:
    """Items grouped by configuration, then by seed (seeds sorted). A (configuration, seed) seen again
    replaces the earlier one (a rerun's row counts), unless `on_repeat` raises."""
    out: dict[K, dict[int, T]] = defaultdict(dict)
    for item in items:
        k, s = key(item), seed(item)
        if s in out[k] and on_repeat is not None:
            on_repeat(k, s, out[k][s], item)
        out[k][s] = item
    return {k: dict(sorted(v.items())) for k, v in out.items()}


def paired_deltas(groups: dict[K, dict[int, float]], is_baseline: Callable[[K], bool],
                  pair_key: Callable[[K], Hashable] = lambda k: ()) -> dict[K, list[float]]:
    """Per configuration that is not a baseline: its value minus the baseline's (the baseline with the
    same `pair_key`), seed by seed over the seeds both have, in seed order. Configurations without a
    baseline or without a shared seed are left out."""
    bases = {pair_key(k): v for k, v in groups.items() if is_baseline(k)}
    out: dict[K, list[float]] = {}
    for k, values in groups.items():
        base = bases.get(pair_key(k))
        if is_baseline(k) or base is None:
            continue
        seeds = sorted(set(values) & set(base))
        if seeds:
            out[k] = [values[s] - base[s] for s in seeds]
    return out
