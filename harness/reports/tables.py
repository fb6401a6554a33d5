"""The leaderboard's tables in the style of BFCL's data_overall.csv: Rank first, percentages, N/A where
nothing was evaluated, rows sorted by the headline number with N/A rows last. A table is a list of rows
of strings, header first; `html_report.py` writes them as CSV and HTML, `console.py` prints them."""
from __future__ import annotations

import statistics
from collections import defaultdict

from harness.reports.aggregate import Stat, mean
from harness.reports.leaderboard import NA, Entry


def pct(x: float | None, signed: bool = False) -> str:
    return NA if x is None else (f"{x * 100:+.2f}%" if signed else f"{x * 100:.2f}%")


def ci(s: Stat | None) -> str:
    return NA if s is None or s.half is None else f"±{s.half * 100:.2f}%"


def _plain(x: float | None, nd: int = 1) -> str:
    return NA if x is None else f"{x:.{nd}f}"


def _or_na(x: str) -> str:
    return NA if x in ("-", "none") else x


ENV_COLUMNS = ["Rank", "Success", "95% CI", "Seeds", "Runs", "Δ vs Outcome", "Δ 95% CI", "Paired Seeds", "Model",
               "Agent", "Signal", "Judge", "Hints", "Teacher", "Mode", "Suite", "Split", "Tasks", "Train Episodes",
               "Success Before", "Gain", "Gain 95% CI", "Mean Steps", "Infra Failures", "Tokens", "Wall (s)"]


def _ranked(items: list, key) -> list:
    return sorted(items, key=lambda x: (key(x) is None, -(key(x) or 0.0)))


def _env_row(rank: int, e: Entry) -> list[str]:
    c, m, delta = e.context, e.method, e.delta_vs_baseline
    training = e.is_training
    return [
        str(rank), pct(e.success.mean), ci(e.success), str(e.success.n), str(e.runs),
        pct(delta.mean, signed=True) if delta else NA, ci(delta), str(delta.n) if delta else NA,
        _or_na(c.model), c.agent, _or_na(m.signal), _or_na(m.judge), _or_na(m.hints), _or_na(m.teacher),
        _or_na(m.mode), c.suite, c.split, str(c.n_tasks),
        str(c.train_episodes) if training else NA,
        pct(mean([r.success_before for r in e.rows.values()])) if training else NA,
        pct(e.gain.mean, signed=True) if e.gain else NA, ci(e.gain),
        _plain(e.means["mean_steps"], 2), _plain(e.means["infra_failures"], 2), _plain(e.means["tokens"], 0),
        _plain(e.means["wall_s"], 1)]


def env_table(entries: list[Entry]) -> list[list[str]]:
    """One env's table (header first): every entry, best mean success first."""
    return [ENV_COLUMNS] + [_env_row(rank, e)
                            for rank, e in enumerate(_ranked(entries, lambda e: e.success.mean), start=1)]


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
    success on that env, N/A where it was not evaluated there. Overall is the mean over the envs that
    every entrant was evaluated on (named in the header), so entrants are ranked on the same envs:
    one that ran fewer envs is never ranked on (or below) another's extra ones. Where no env is
    common to all, Overall is N/A and the rows are sorted by name."""
    entrants: dict[tuple, dict[str, Entry]] = defaultdict(dict)
    for (agent, model, method, env), e in headline(entries).items():
        entrants[(agent, model, method)][env] = e
    common = sorted(set.intersection(*(set(per_env) for per_env in entrants.values()))) if entrants else []
    rows = []
    for (agent, model, method), per_env in entrants.items():
        overall = statistics.fmean(per_env[env].success.mean for env in common) if common else None
        rows.append((overall, (agent, model, method.label), [
            pct(overall) if overall is not None else NA, f"{len(per_env)}/{len(envs)}", _or_na(model), agent,
            method.label if method.signal != "none" else NA,
            *[pct(per_env[env].success.mean) if env in per_env else NA for env in envs]]))
    rows.sort(key=lambda x: (-(x[0] if x[0] is not None else 0.0), x[1]))
    over = f"Overall Acc ({', '.join(common)})" if common else "Overall Acc (no env common to all)"
    header = ["Rank", over, "Envs", "Model", "Agent", "Method", *envs]
    return [header] + [[str(rank), *cells] for rank, (_, _, cells) in enumerate(rows, start=1)]
