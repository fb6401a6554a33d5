"""Every report's pictures: a sweep's success against training episodes (redrawn by each job that
finishes), the leaderboard's learning curves, the signal comparison's paired deltas and the personal
agent's score against updates. Means over seeds come from aggregate.py; each file is written atomically."""
from __future__ import annotations

import fcntl
import json
import re
from collections import defaultdict
from pathlib import Path

from harness.reports.aggregate import Method, Stat, labels
from harness.reports.leaderboard import Entry
from nextstate.atomic import save_figure_atomic


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _mean_curve(ax, curves: list[list[tuple[float, float]]], color: str, label: str, band: bool) -> None:
    """Each seed's curve faint, their mean at every x bold, and (with `band`) its 95% t-interval,
    clipped to [0, 1]: a rate."""
    for c in curves:
        ax.plot([p[0] for p in c], [p[1] for p in c], color=color, alpha=0.2, lw=1)
    xs = sorted({p[0] for c in curves for p in c})
    stats = [Stat.of([y for c in curves for x2, y in c if x2 == x]) for x in xs]
    ax.plot(xs, [s.mean for s in stats], color=color, lw=2, marker="o", label=f"{label} (n={len(curves)})")
    if band and any(s.half for s in stats):
        ax.fill_between(xs, [max(0.0, s.mean - (s.half or 0.0)) for s in stats],
                        [min(1.0, s.mean + (s.half or 0.0)) for s in stats], color=color, alpha=0.15, lw=0)


def _finish(fig, ax, title: str, ylabel: str, fontsize: int = 8) -> None:
    ax.set_xlabel("training episodes")
    ax.set_ylabel(ylabel)
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=fontsize)
    ax.set_title(title)
    fig.tight_layout()


# ---- a sweep (harness.run draws it after each job; python -m harness.compare too)

def load_curves(sweep_dir: Path) -> dict[str, list[list[list[float]]]]:
    """The learning curves of a sweep's finished runs (metrics.json), by method (aggregate.labels)."""
    curves: dict[Method, list] = defaultdict(list)
    for f in sorted(Path(sweep_dir).glob("*/metrics.json")):
        try:
            m = json.loads(f.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if m.get("curve") and m.get("signal"):
            curves[Method.of_metrics(m)].append(m["curve"])
    names = labels(curves)
    return {names[k]: v for k, v in curves.items()}


def write_sweep_plot(sweep_dir: Path, name: str = "success_vs_samples.png") -> Path:
    """Test success vs training episodes, one line per method (mean over seeds, each seed faint behind
    it). Redrawn by every job that finishes, under a lock."""
    plt = _pyplot()
    sweep_dir = Path(sweep_dir)
    out = sweep_dir / name
    with open(sweep_dir / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
        for i, (label, runs) in enumerate(sorted(load_curves(sweep_dir).items())):
            _mean_curve(ax, runs, f"C{i}", label, band=False)
        _finish(fig, ax, sweep_dir.name, "test success rate")
        save_figure_atomic(fig, out)
    return out


# ---- the leaderboard

def seed_curve(entry: Entry, seed: int) -> list[tuple[float, float]]:
    """A seed's learning curve: the run dir's metrics.json "curve" when it is still there (run dirs
    are not committed), else the two points every training row carries (before, after)."""
    row = entry.rows[seed]
    try:
        curve = json.loads((Path(row.run_dir) / "metrics.json").read_text()).get("curve")
        if curve and all(len(p) == 2 for p in curve):
            return [(float(x), float(y)) for x, y in curve]
    except (OSError, ValueError, TypeError):
        pass
    before = row.success_before if row.success_before is not None else row.success
    return [(0.0, before), (float(entry.context.train_episodes or 0), row.success)]


def leaderboard_curves(env: str, entries: list[Entry], out_dir: Path) -> list[Path]:
    """One PNG per (model, split, tasks) of this env: success vs training episodes, a line per
    method (mean over seeds, 95% band where there are two or more), eval-only entries dashed."""
    plt = _pyplot()
    figures: dict[tuple, list[Entry]] = defaultdict(list)
    for e in entries:
        if e.is_training:
            figures[(e.context.model, e.context.split, e.context.n_tasks)].append(e)
    paths = []
    for i, ((model, split, n_tasks), trained) in enumerate(sorted(figures.items(), key=str), start=1):
        fig, ax = plt.subplots(figsize=(6.4, 4), dpi=110)
        budgets = {e.context.train_episodes for e in trained}
        for j, e in enumerate(sorted(trained, key=lambda e: (e.method.label, e.context.train_episodes))):
            label = e.method.label + (f" [{e.context.train_episodes} ep]" if len(budgets) > 1 else "")
            _mean_curve(ax, [seed_curve(e, s) for s in e.rows], f"C{j % 10}", label, band=True)
        for k, e in enumerate(x for x in entries if not x.is_training and x.context.split == split
                              and x.context.n_tasks == n_tasks):
            ax.axhline(e.success.mean, color="0.4", ls=(0, (4, 2 + k)), lw=1,
                       label=f"{e.context.agent} eval (n={e.success.n})")
        _finish(fig, ax, f"{env}: {model}", f"{split} success rate ({n_tasks} tasks)", fontsize=7)
        path = out_dir / f"curves_{re.sub(r'[^A-Za-z0-9_.-]+', '_', env)}_{i}.png"
        paths.append(save_figure_atomic(fig, path))
    return paths


def env_chart(env: str, entries: list[Entry], out_dir: Path) -> Path:
    """One env's entries as horizontal bars: mean success over seeds with its 95% interval, best on top,
    each labelled with what it is (agent, model, method, split, tasks)."""
    plt = _pyplot()
    ranked = sorted(entries, key=lambda e: e.success.mean)
    fig, ax = plt.subplots(figsize=(7.5, 0.9 + 0.32 * len(ranked)), dpi=110)
    labels = [f"{e.context.agent} {e.context.model if e.context.model not in ('', '-') else ''} "
              f"{e.method.label if e.method.signal != 'none' else ''} [{e.context.split}, {e.context.n_tasks} tasks, "
              f"{e.success.n} seed{'s' if e.success.n > 1 else ''}]".replace("  ", " ") for e in ranked]
    ax.barh(range(len(ranked)), [e.success.mean for e in ranked],
            xerr=[e.success.half or 0.0 for e in ranked], color="C0", ecolor="0.3", capsize=3)
    ax.set_yticks(range(len(ranked)), labels, fontsize=7)
    ax.set_xlim(0, 1)
    ax.set_xlabel("success rate (mean over seeds, 95% interval)")
    ax.set_title(env, fontsize=9)
    fig.tight_layout()
    return save_figure_atomic(fig, out_dir / f"chart_{re.sub(r'[^A-Za-z0-9_.-]+', '_', env)}.png")


# ---- the signal comparison and the personal agent

def paired_bars(deltas: dict[tuple[str, str], dict[str, list[float]]], metrics: tuple[str, ...], out: Path) -> None:
    """Per metric a panel: per (signal, feedback) the mean paired Δ vs outcome as a bar, seeds as dots."""
    plt = _pyplot()
    keys = sorted(deltas)
    fig, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics), 4), dpi=120, squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        for i, key in enumerate(keys):
            xs = deltas[key][metric]
            ax.bar(i, Stat.of(xs).mean, color="C0" if key[1] == "model" else "C1", alpha=0.5)
            ax.scatter([i] * len(xs), xs, color="k", s=12, zorder=3)
        ax.axhline(0, color="gray", lw=1)
        ax.set_xticks(range(len(keys)), [f"{s}\n{f}" for s, f in keys], fontsize=8)
        ax.set_title(f"test {metric.replace('_', ' ')}: paired Δ vs outcome", fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("bars: mean over seeds (blue: model judge/hints, orange: oracle); dots: seeds", fontsize=8)
    fig.tight_layout()
    save_figure_atomic(fig, out)


def score_curves(rows: list[dict], path: Path, setting: str = "persona",
                 ylabel: str = "held-out score (first reply meets every preference)",
                 xlabel: str = "updates (16 samples each)") -> Path:
    """Mean held-out score against updates, one line per (signal, judge), a panel per setting (a
    persona, or an env); the band spans the seeds' lowest and highest score."""
    plt = _pyplot()
    personas = sorted({r[setting] for r in rows})
    fig, axes = plt.subplots(1, len(personas), figsize=(5.5 * len(personas), 4), squeeze=False)
    for ax, persona in zip(axes[0], personas):
        lines: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
        for r in rows:
            if r[setting] == persona:
                lines[(r["signal"], r["judge"])][r["updates"]].append(r["score"])
        for (signal, judge), pts in sorted(lines.items()):
            xs = sorted(pts)
            label = signal if judge == "-" else f"{signal} ({judge} judge)"
            (line,) = ax.plot(xs, [Stat.of(pts[x]).mean for x in xs], marker="o", label=label,
                              linestyle="--" if judge == "model" else "-")
            ax.fill_between(xs, [min(pts[x]) for x in xs], [max(pts[x]) for x in xs], alpha=0.12,
                            color=line.get_color())
        ax.set_title(f"{setting}: {persona}")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure_atomic(fig, path)


def want_curves(wants: list[dict], path: Path) -> Path:
    """Each preference's held-out rate against updates: a row of panels per persona, one panel per
    preference, one line per (signal, judge), mean over seeds."""
    plt = _pyplot()
    personas = sorted({r["persona"] for r in wants})
    names = {p: sorted({r["want"] for r in wants if r["persona"] == p}) for p in personas}
    cols = max(len(n) for n in names.values())
    fig, axes = plt.subplots(len(personas), cols, figsize=(3.6 * cols, 3.2 * len(personas)), squeeze=False)
    for row, persona in zip(axes, personas):
        for ax in row[len(names[persona]):]:
            ax.axis("off")
        for ax, want in zip(row, names[persona]):
            lines: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
            for r in wants:
                if r["persona"] == persona and r["want"] == want:
                    lines[(r["signal"], r["judge"])][r["updates"]].append(r["rate"])
            for (signal, judge), pts in sorted(lines.items()):
                xs = sorted(pts)
                ax.plot(xs, [Stat.of(pts[x]).mean for x in xs], marker="o", ms=3,
                        label=signal if judge == "-" else f"{signal} ({judge})",
                        linestyle="--" if judge == "model" else "-")
            ax.set_title(f"{persona}: {want}", fontsize=9)
            ax.set_xlabel("updates", fontsize=8)
            ax.set_ylim(-0.02, 1.02)
            ax.grid(alpha=0.3)
        row[0].set_ylabel("share of first replies meeting it", fontsize=8)
        row[0].legend(fontsize=6)
    fig.tight_layout()
    return save_figure_atomic(fig, path)
