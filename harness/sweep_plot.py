"""The sweep's picture: test success vs training episodes, one line per signal (mean over seeds,
with each seed faint behind it). Redrawn by every job that finishes, under a lock."""
from __future__ import annotations

import fcntl
import json
from collections import defaultdict
from pathlib import Path

from nextstate.atomic import save_figure_atomic


def run_label(metrics: dict) -> str:
    """A finished run's line in sweep tables and plots: its signal, marked when trained asynchronously
    (a sweep over mode=train,async keeps the two apart)."""
    return metrics["signal"] + (" (async)" if metrics.get("mode") == "async" else "")


def load_curves(sweep_dir: Path) -> dict[str, list[list[list[float]]]]:
    curves: dict[str, list] = defaultdict(list)
    for f in sorted(Path(sweep_dir).glob("*/metrics.json")):
        try:
            m = json.loads(f.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if m.get("curve") and m.get("signal"):
            curves[run_label(m)].append(m["curve"])
    return curves


def write_sweep_plot(sweep_dir: Path, name: str = "success_vs_samples.png") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sweep_dir = Path(sweep_dir)
    out = sweep_dir / name
    with open(sweep_dir / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        curves = load_curves(sweep_dir)
        fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
        for i, (signal, runs) in enumerate(sorted(curves.items())):
            color = f"C{i}"
            for run in runs:
                ax.plot([p[0] for p in run], [p[1] for p in run], color=color, alpha=0.2, lw=1)
            xs = sorted({p[0] for run in runs for p in run})
            means = [sum(p[1] for run in runs for p in run if p[0] == x) /
                     max(1, sum(1 for run in runs for p in run if p[0] == x)) for x in xs]
            ax.plot(xs, means, color=color, lw=2, marker="o", label=f"{signal} (n={len(runs)})")
        ax.set_xlabel("training episodes")
        ax.set_ylabel("test success rate")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize=8)
        ax.set_title(sweep_dir.name)
        fig.tight_layout()
        save_figure_atomic(fig, out)
    return out
