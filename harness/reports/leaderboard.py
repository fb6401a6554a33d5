"""The leaderboard's runs: results/leaderboard.csv validated, then aggregated over seeds into entries.

One *entry* is one configuration evaluated on one env: the context (env, suite, split, number of
tasks, agent, model, training budget) and the method (aggregate.Method: signal, judge, hints, teacher
and the training mode: `async` rows pair only with async outcome rows). Its seeds give a mean success
rate with a 95% t-interval; a training entry is also paired, seed by seed, with the outcome-reward
(GRPO) entry of the same context, and the mean paired difference gets its own interval.

Rows are validated before anything is computed: an unknown env, a seed that is not an integer or a
success rate that is not a number in [0, 1] is a `LeaderboardError` naming the file and line.
A configuration run again with the same seed is a re-run: every row is kept, and that seed's value is
the mean of its runs (the entry's `runs` counts them), so no result silently replaces another.
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from harness.reports.aggregate import Method, Stat, by_seed, mean, paired_deltas
from nextstate.leaderboard import LeaderboardError, read_numbered_rows

NA = "N/A"
REQUIRED = ("env", "agent", "model", "signal", "seed", "split", "n_tasks", "success_rate")
MEANS = ("mean_steps", "infra_failures", "tokens", "wall_s")


@dataclass(frozen=True)
class Context:
    """What must match for two runs to be comparable (and for a signal to pair with outcome)."""

    env: str
    suite: str
    split: str
    n_tasks: int
    agent: str
    model: str
    train_episodes: int | None


@dataclass(frozen=True)
class Row:
    """One validated leaderboard row."""

    line: int
    context: Context
    method: Method
    seed: int
    success: float
    success_before: float | None
    mean_steps: float | None
    infra_failures: float | None
    tokens: float | None
    wall_s: float | None
    run_dir: str
    timestamp: str


@dataclass
class Entry:
    context: Context
    method: Method
    rows: dict[int, Row]  # by seed: the last row appended for that seed
    success: Stat  # over seeds, each seed the mean of its runs
    runs: int = 0  # rows behind the entry (more than its seeds where a seed was re-run)
    delta_vs_baseline: Stat | None = None  # paired with the outcome entry of the same context
    gain: Stat | None = None  # success after training minus before, per seed
    means: dict[str, float | None] = field(default_factory=dict)  # mean_steps, tokens, wall_s ...

    @property
    def is_training(self) -> bool:
        return self.context.train_episodes is not None


def _num(raw: str | None, path: Path, line: int, col: str, *, kind=float, required=False):
    if raw is None or raw.strip() in ("", "-", NA, "None", "nan"):
        if required:
            raise LeaderboardError(f"{path}: line {line}: column {col!r} is empty")
        return None
    try:
        return kind(float(raw)) if kind is int else kind(raw)
    except ValueError:
        raise LeaderboardError(f"{path}: line {line}: column {col!r} is {raw!r}, not a number") from None


def _row(r: dict, path: Path, line: int, known_envs: set[str]) -> Row:
    if r["env"] not in known_envs:
        raise LeaderboardError(f"{path}: line {line}: unknown env {r['env']!r} "
                               f"(registered: {', '.join(sorted(known_envs))})")
    seed = _num(r["seed"], path, line, "seed", kind=int, required=True)
    if float(r["seed"]) != seed:
        raise LeaderboardError(f"{path}: line {line}: seed {r['seed']!r} is not an integer")
    success = _num(r["success_rate"], path, line, "success_rate", required=True)
    if not 0.0 <= success <= 1.0:
        raise LeaderboardError(f"{path}: line {line}: success_rate {success} is outside [0, 1]")
    n_tasks = _num(r["n_tasks"], path, line, "n_tasks", kind=int, required=True)
    episodes = _num(r.get("train_episodes"), path, line, "train_episodes", kind=int)
    get = lambda c: (r.get(c) or "-").strip() or "-"  # noqa: E731  (columns older rows lack)
    return Row(line=line,
               context=Context(r["env"], get("suite"), get("split"), n_tasks, get("agent"), get("model"), episodes),
               method=Method.of_metrics(r), seed=seed, success=success,
               **{c: _num(r.get(c), path, line, c) for c in ("success_before", *MEANS)},
               run_dir=r.get("run_dir") or "", timestamp=r.get("timestamp") or "")


def validate(path: Path | str, known_envs: set[str] | None = None) -> list[Row]:
    """Every row of the leaderboard, checked; the first problem raises with the file and line."""
    if known_envs is None:
        from envs import ENVS

        known_envs = set(ENVS)
    path = Path(path)
    if not path.exists():
        raise LeaderboardError(f"{path}: no such leaderboard (runs append to it; see results/README.md)")
    header, numbered = read_numbered_rows(path)
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise LeaderboardError(f"{path}: line 1: header lacks columns {missing} needed to aggregate")
    return [_row(r, path, line, known_envs) for line, r in numbered]


def aggregate(rows: list[Row]) -> list[Entry]:
    """Entries (one per context and method), with their paired deltas against outcome."""
    runs: dict[tuple, dict[int, list[Row]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        runs[(r.context, r.method)][r.seed].append(r)
    groups = by_seed(rows, key=lambda r: (r.context, r.method), seed=lambda r: r.seed)  # the last row per seed
    entries = {}
    per_seed: dict[tuple, dict[int, float]] = {}
    for k, seeds in groups.items():
        ctx, method = k
        per_seed[k] = {s: statistics.fmean(r.success for r in runs[k][s]) for s in seeds}
        every = [r for s in seeds for r in runs[k][s]]
        gains = [statistics.fmean(r.success - r.success_before for r in runs[k][s]) for s in seeds
                 if all(r.success_before is not None for r in runs[k][s])]
        entries[k] = Entry(
            ctx, method, seeds, Stat.of(per_seed[k].values()), runs=len(every),
            gain=Stat.of(gains) if ctx.train_episodes is not None and gains else None,
            means={m: mean([getattr(r, m) for r in every]) for m in MEANS})
    trained = {k: v for k, v in per_seed.items() if k[0].train_episodes is not None}
    deltas = paired_deltas(trained, is_baseline=lambda k: k[1].is_baseline, pair_key=lambda k: (k[0], k[1].mode))
    for k, d in deltas.items():
        entries[k].delta_vs_baseline = Stat.of(d)
    return list(entries.values())


def by_env(entries: list[Entry]) -> dict[str, list[Entry]]:
    out: dict[str, list[Entry]] = defaultdict(list)
    for e in entries:
        out[e.context.env].append(e)
    return dict(sorted(out.items()))
