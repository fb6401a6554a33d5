"""`python -m trainers.train_plot <run_dir>`: a training run's updates at a glance, from its
`train_log.jsonl`: the PPO losses, rollout and evaluation success, what each update trained on, the
update's health (clipping, KL) and, for async and proxy runs, staleness and waiting. Written to
`<run_dir>/train_curves.png` when a run finishes and after every update of a proxy (which may
never finish); the command redraws it for a run still going."""
from __future__ import annotations

import sys
from pathlib import Path

from nextstate.atomic import read_jsonl, save_figure_atomic

# panel title -> the log keys drawn in it (a panel is drawn when the log has any of them)
PANELS: list[tuple[str, list[str]]] = [
    ("loss", ["loss", "pg_loss", "kl"]),
    ("success", ["rollout_success", "eval_success"]),
    ("per update", ["samples", "hints_accepted", "judge_votes"]),
    ("PPO health", ["clip_fraction", "approx_kl"]),
    ("async", ["staleness_mean", "staleness_max", "dropped_stale"]),
    ("seconds", ["trainer_wait_s", "update_s", "publish_s"]),
]


def panels_for(log: list[dict]) -> list[tuple[str, list[str]]]:
    """The panels this log fills, each with the keys it has numbers for."""
    panels = [(title, [k for k in keys if any(isinstance(r.get(k), (int, float)) for r in log)])
              for title, keys in PANELS]
    return [(title, keys) for title, keys in panels if keys]


def write_train_plot(run_dir: Path, name: str = "train_curves.png") -> Path | None:
    """Draw the run's log (None when it has no update yet)."""
    run_dir = Path(run_dir)
    log = read_jsonl(run_dir / "train_log.jsonl")
    if not log:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    panels = panels_for(log)
    cols = 2
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(10, 3 * rows), dpi=100, squeeze=False)
    x = [r.get("iteration", i) + 1 for i, r in enumerate(log)]
    for ax, (title, keys) in zip(axes.flat, panels):
        for key in keys:
            points = [(xi, r[key]) for xi, r in zip(x, log) if isinstance(r.get(key), (int, float))]
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", ms=3, label=key)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("update")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle(f"{run_dir.name}: {len(log)} updates", fontsize=11)
    fig.tight_layout()
    return save_figure_atomic(fig, run_dir / name)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m trainers.train_plot <run_dir>")
    path = write_train_plot(Path(sys.argv[1]))
    print(path if path else f"{sys.argv[1]}: no train_log.jsonl with updates yet")
