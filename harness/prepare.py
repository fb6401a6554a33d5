"""`python -m harness.prepare images|model|leaderboard`: the set-up steps `make` runs. Each one
skips what is already done (images by content hash, the model cache by its files)."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from nextstate.config import compose, model_config, typed


def prepare_images() -> None:
    from tqdm import tqdm

    from envs.sandbox import SandboxConfig
    from envs.terminal.env import TerminalEnv, TerminalEnvConfig

    cfg = compose(["env=terminal"])
    t0 = time.monotonic()
    env = TerminalEnv(typed(cfg.env, TerminalEnvConfig), typed(cfg.sandbox, SandboxConfig))
    with tqdm(total=len(env.tasks), desc="terminal task images") as bar:
        env.prepare(progress=lambda _t: bar.update())
    print(f"[setup] {len(env.tasks)} terminal task images ready ({time.monotonic() - t0:.0f} s)")


def prepare_swe_images() -> None:
    from tqdm import tqdm

    from envs.sandbox import SandboxConfig
    from envs.swe.env import SWEEnv, SWEEnvConfig

    cfg = compose(["env=swe"])
    t0 = time.monotonic()
    env = SWEEnv(typed(cfg.env, SWEEnvConfig), typed(cfg.sandbox, SandboxConfig), split="all")
    with tqdm(total=len(env.tasks), desc="SWE instance images") as bar:
        env.prepare(progress=lambda _t: bar.update())
    print(f"[setup] {len(env.tasks)} SWE instance images ready ({time.monotonic() - t0:.0f} s)")


def prepare_model() -> None:
    from agents.model_cache import ensure_cached

    cfg = compose()
    m = model_config(cfg.model)
    t0 = time.monotonic()
    path = ensure_cached(m.source, Path(cfg.paths.cache_dir) / "models", package=m.package,
                         gguf_file=m.gguf_file)
    print(f"[setup] model {m.name} at {path} ({time.monotonic() - t0:.1f} s)")


def print_leaderboard(last: int = 10) -> None:
    from rich.table import Table

    from harness.reports.console import console
    from nextstate.leaderboard import read_rows

    cfg = compose()
    path = Path(cfg.paths.results_dir) / "leaderboard.csv"
    header, rows = read_rows(path)
    cols = [c for c in ("timestamp", "env", "split", "agent", "model", "signal", "seed", "n_tasks",
                        "success_rate", "mean_steps", "infra_failures", "tokens", "wall_s") if c in header]
    table = Table(title=f"{path} (last {min(last, len(rows))} of {len(rows)} rows)")
    for c in cols:
        table.add_column(c)
    for r in rows[-last:]:
        table.add_row(*[r.get(c, "") for c in cols])
    console().print(table)


STEPS = {"images": prepare_images, "swe-images": prepare_swe_images, "model": prepare_model,
         "leaderboard": print_leaderboard}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in STEPS:
        sys.exit(f"usage: python -m harness.prepare {{{'|'.join(STEPS)}}}")
    STEPS[sys.argv[1]]()
