"""The leaderboard's numbers: results/leaderboard.csv aggregated over seeds.

One *entry* is one configuration evaluated on one env: the context (env, suite, split, number of
tasks, agent, model, training budget) and the method (signal, judge, hints, teacher, and the training
mode: `async` rows pair only with async outcome rows). Its seeds give a
mean success rate with a 95% t-interval; a training entry is also paired, seed by seed, with the
outcome-reward (GRPO) entry of the same context, and the mean paired difference gets its own interval.
Pairing removes the seed's share of the variance (the same tasks, the same initial eval), which is
why a paired delta can be significant where two overlapping intervals are not.

Rows are validated before anything is computed: an unknown env, a seed that is not an integer or a
success rate that is not a number in [0, 1] is a `LeaderboardError` naming the file and line.
When a configuration was run twice with the same seed, the row appended last counts.
"""
from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from nextstate.leaderboard import LeaderboardError, read_numbered_rows

BASELINE_SIGNAL = "outcome"  # the paper's baseline: outcome reward only (GRPO)
NA = "N/A"
REQUIRED = ("env", "agent", "model", "signal", "seed", "split", "n_tasks", "success_rate")

# Two-sided 95% Student t quantiles by degrees of freedom; above 30 the next lower tabulated df is
# used (a slightly wider, conservative interval). Tabulated rather than computed: no scipy here.
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
        10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110,
        18: 2.101, 19: 2.093, 20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060,
        26: 2.056, 27: 2.052, 28: 2.048, 29: 2.045, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980}


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
    def of(cls, values: list[float]) -> "Stat":
        n = len(values)
        mean = statistics.fmean(values)
        half = t95(n - 1) * statistics.stdev(values) / math.sqrt(n) if n > 1 else None
        return cls(mean, half, n)


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
class Method:
    signal: str
    judge: str
    hints: str
    teacher: str
    mode: str = "-"  # "-": synchronous training (or an eval); "async": mode=async

    @property
    def label(self) -> str:
        extra = [f"{k}={v}" for k, v in (("judge", self.judge), ("hints", self.hints), ("teacher", self.teacher),
                                         ("mode", self.mode)) if v not in ("-", "")]
        return self.signal + (f" ({', '.join(extra)})" if extra else "")


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
    success: Stat
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
    rows = []
    for line, r in numbered:
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
        get = lambda c: (r.get(c) or "-").strip() or "-"  # noqa: E731, B023  (columns older rows lack; used here)
        rows.append(Row(
            line=line,
            context=Context(r["env"], get("suite"), get("split"), n_tasks, get("agent"), get("model"), episodes),
            method=Method(get("signal"), get("judge"), get("hints"), get("teacher"), get("mode")),
            seed=seed, success=success,
            success_before=_num(r.get("success_before"), path, line, "success_before"),
            mean_steps=_num(r.get("mean_steps"), path, line, "mean_steps"),
            infra_failures=_num(r.get("infra_failures"), path, line, "infra_failures"),
            tokens=_num(r.get("tokens"), path, line, "tokens"),
            wall_s=_num(r.get("wall_s"), path, line, "wall_s"),
            run_dir=r.get("run_dir") or "", timestamp=r.get("timestamp") or ""))
    return rows


def _mean(xs: list[float | None]) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


def aggregate(rows: list[Row]) -> list[Entry]:
    """Entries (one per context and method), with their paired deltas against outcome."""
    groups: dict[tuple[Context, Method], dict[int, Row]] = defaultdict(dict)
    for r in rows:  # file order = the order runs finished: a rerun's row replaces the earlier one
        groups[(r.context, r.method)][r.seed] = r
    entries = []
    for (ctx, method), by_seed in groups.items():
        by_seed = dict(sorted(by_seed.items()))
        vals = list(by_seed.values())
        gains = [r.success - r.success_before for r in vals if r.success_before is not None]
        entries.append(Entry(ctx, method, by_seed, Stat.of([r.success for r in vals]),
                             gain=Stat.of(gains) if ctx.train_episodes is not None and gains else None,
                             means={k: _mean([getattr(r, k) for r in vals])
                                    for k in ("mean_steps", "infra_failures", "tokens", "wall_s")}))
    baselines = {(e.context, e.method.mode): e for e in entries if e.method.signal == BASELINE_SIGNAL}
    for e in entries:
        base = baselines.get((e.context, e.method.mode))
        if base is None or e is base or not e.is_training:
            continue
        seeds = sorted(set(e.rows) & set(base.rows))
        if seeds:
            e.delta_vs_baseline = Stat.of([e.rows[s].success - base.rows[s].success for s in seeds])
    return entries


# ---- tables in the style of BFCL's data_overall.csv: Rank first, percentages, N/A where nothing
# ---- was evaluated, rows sorted by the headline number with N/A rows last.

def pct(x: float | None, signed: bool = False) -> str:
    return NA if x is None else (f"{x * 100:+.2f}%" if signed else f"{x * 100:.2f}%")


def ci(s: Stat | None) -> str:
    return NA if s is None or s.half is None else f"±{s.half * 100:.2f}%"


def _plain(x: float | None, nd: int = 1) -> str:
    return NA if x is None else f"{x:.{nd}f}"


ENV_COLUMNS = ["Rank", "Success", "95% CI", "Seeds", "Δ vs Outcome", "Δ 95% CI", "Paired Seeds", "Model",
               "Agent", "Signal", "Judge", "Hints", "Teacher", "Mode", "Split", "Tasks", "Train Episodes",
               "Success Before", "Gain", "Gain 95% CI", "Mean Steps", "Infra Failures", "Tokens", "Wall (s)"]


def _ranked(items: list, key) -> list:
    return sorted(items, key=lambda x: (key(x) is None, -(key(x) or 0.0)))


def env_table(entries: list[Entry]) -> list[list[str]]:
    """One env's table (header first): every entry, best mean success first."""
    out = [ENV_COLUMNS]
    for rank, e in enumerate(_ranked(entries, lambda e: e.success.mean), start=1):
        c, m = e.context, e.method
        training = e.is_training
        delta = e.delta_vs_baseline
        out.append([
            str(rank), pct(e.success.mean), ci(e.success), str(e.success.n),
            pct(delta.mean, signed=True) if delta else NA, ci(delta), str(delta.n) if delta else NA,
            c.model if c.model != "-" else NA, c.agent, m.signal if m.signal != "none" else NA,
            m.judge if m.judge != "-" else NA, m.hints if m.hints != "-" else NA,
            m.teacher if m.teacher != "-" else NA, m.mode if m.mode != "-" else NA, c.split, str(c.n_tasks),
            str(c.train_episodes) if training else NA,
            pct(_mean([r.success_before for r in e.rows.values()])) if training else NA,
            pct(e.gain.mean, signed=True) if e.gain else NA, ci(e.gain),
            _plain(e.means["mean_steps"], 2), _plain(e.means["infra_failures"], 2), _plain(e.means["tokens"], 0),
            _plain(e.means["wall_s"], 1)])
    return out


def headline(entries: list[Entry]) -> dict[tuple, Entry]:
    """Per (entrant, env), the entry the overall table shows: most seeds, then most tasks, then the
    largest training budget (an entrant is agent + model + method, whatever the context)."""
    best: dict[tuple, Entry] = {}
    score = lambda e: (e.success.n, e.context.n_tasks, e.context.train_episodes or 0)  # noqa: E731
    for e in entries:
        k = (e.context.agent, e.context.model, e.method, e.context.env)
        if k not in best or score(e) > score(best[k]):
            best[k] = e
    return best


def overall_table(entries: list[Entry], envs: list[str]) -> list[list[str]]:
    """Entrants x envs (header first), like BFCL's data_overall.csv: a cell is the entrant's mean
    success on that env, N/A where it was not evaluated there. Overall = the mean over the envs it
    was evaluated on (BFCL counts N/A as 0; here the Envs column says how many count), ranked by
    envs evaluated, then overall."""
    best = headline(entries)
    entrants: dict[tuple, dict[str, Entry]] = defaultdict(dict)
    for (agent, model, method, env), e in best.items():
        entrants[(agent, model, method)][env] = e
    rows = []
    for (agent, model, method), per_env in entrants.items():
        overall = statistics.fmean(e.success.mean for e in per_env.values())
        rows.append((len(per_env), overall, [
            "", pct(overall), f"{len(per_env)}/{len(envs)}", model if model != "-" else NA, agent,
            method.label if method.signal != "none" else NA,
            *[pct(per_env[env].success.mean) if env in per_env else NA for env in envs]]))
    rows.sort(key=lambda x: (-x[0], -x[1]))
    out = [["Rank", "Overall Acc", "Envs", "Model", "Agent", "Method", *envs]]
    for rank, (_, _, cells) in enumerate(rows, start=1):
        out.append([str(rank), *cells[1:]])
    return out


def by_env(entries: list[Entry]) -> dict[str, list[Entry]]:
    out: dict[str, list[Entry]] = defaultdict(list)
    for e in entries:
        out[e.context.env].append(e)
    return dict(sorted(out.items()))
