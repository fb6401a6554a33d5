"""A multi-run command says up front what it will do and keeps an overall ETA: a Hydra callback
(conf/config.yaml, `hydra.callbacks`). At the start of a multirun it prints how many runs the sweep
has (the product of its comma-separated overrides) and how many updates each trains; after each run,
how many are done and the time left at the pace so far. State lives in the sweep dir, so it holds under
the joblib launcher too (each job counts the finished runs it finds)."""
from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

STATE = ".sweep_progress.json"


def sweep_size(overrides: list[str]) -> int:
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    return math.prod(len(list(o.sweep_iterator())) if o.is_sweep_override() else 1 for o in parsed)


def _finished(sweep_dir: Path) -> set[str]:
    return {p.parent.name for p in sweep_dir.glob("*/metrics.json")}


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"


class SweepProgress(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        total = sweep_size(config.hydra.overrides.task)
        before = _finished(sweep_dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        (sweep_dir / STATE).write_text(json.dumps({"total": total, "start": time.time(), "before": sorted(before)}))
        mode = config.get("mode") or {}
        updates = f", {mode.get('iterations')} updates each" if mode.get("name") in ("train", "async") else ""
        done = f" ({len(before)} already finished, skipped)" if before else ""
        print(f"[sweep] {total} runs{updates}{done} -> {sweep_dir}", flush=True)

    def on_job_end(self, config: DictConfig, job_return: Any = None, **kwargs: Any) -> None:
        try:
            sweep_dir = Path(config.hydra.sweep.dir)
            state = json.loads((sweep_dir / STATE).read_text())
        except (OSError, ValueError, AttributeError, TypeError):
            return  # a single run, or a sweep started without the callback
        done_now = _finished(sweep_dir) - set(state["before"])
        left = state["total"] - len(state["before"]) - len(done_now)
        elapsed = time.time() - state["start"]
        eta = f", ~{_minutes(elapsed / len(done_now) * left)} left" if done_now and left > 0 else ""
        print(f"[sweep] {len(done_now) + len(state['before'])}/{state['total']} runs finished after "
              f"{_minutes(elapsed)}{eta}", flush=True)
