"""The regression benchmark's checks: each runs `python -m harness.run` as a user would (its own
process, a scratch results dir) and reads its metrics back from the leaderboard rows and run dirs.

- validity:    oracle and noop on a fixed sample, as one Hydra multirun on the joblib launcher (two
               jobs appending to one leaderboard at the same moment is part of what is checked).
- model_eval:  the default model, greedy, on a fixed subset.
- train_smoke: a short PPO run per signal, `jobs` at a time. `loss_drop` is the PPO loss of an update's
               own batch in its first epoch minus in its last one (trainers/update.py), the smallest
               over the run's updates: > 0 means every update lowered the objective it was given.
               No update (no sample had a non-zero advantage) makes it N/A.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from nextstate.config import REPO_ROOT
from nextstate.leaderboard import read_rows

NA = None  # a metric that has no value in this run (e.g. no update, so no loss)


@dataclass
class CheckRun:
    env: str
    check: str
    overrides: list[str]  # what identifies the benchmark (stored with the baseline)
    metrics: dict[str, float | None]
    wall_s: float
    error: str | None = None  # the run failed: the tail of its log


class RunFailed(RuntimeError):
    pass


def harness_run(args: list[str], results: Path, timeout_s: float) -> None:
    """`python -m harness.run <args>` with its results under `results`; output kept in results/run.log."""
    results.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, NEXTSTATE_RESULTS=str(results))
    log = results / "run.log"
    with open(log, "w") as f:
        try:
            p = subprocess.run([sys.executable, "-m", "harness.run", *args, "progress=false"], cwd=REPO_ROOT,
                               env=env, stdout=f, stderr=subprocess.STDOUT, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise RunFailed(f"timed out after {timeout_s:.0f} s; log: {log}") from None
    if p.returncode != 0:
        tail = log.read_text()[-1500:]
        raise RunFailed(f"exit {p.returncode}; log: {log}\n{tail}")


def _multirun(jobs: int, sweep_dir: Path) -> list[str]:
    return ["-m", "hydra/launcher=joblib", f"hydra.launcher.n_jobs={jobs}", f"hydra.sweep.dir={sweep_dir}"]


def _rows_by(results: Path, key: str) -> dict[str, dict]:
    _, rows = read_rows(results / "leaderboard.csv")
    return {r[key]: r for r in rows}


def _f(x: str | None) -> float | None:
    return None if x in (None, "", "-") else float(x)


def validity(env: str, overrides: list[str], seed: int, work: Path, jobs: int, timeout_s: float) -> dict:
    harness_run([*_multirun(jobs, work / "sweep"), f"env={env}", "agent=oracle,noop", f"seed={seed}", *overrides],
                work, timeout_s)
    rows = _rows_by(work, "agent")
    return {f"{agent}.{m}": _f(rows[agent][m]) if agent in rows else NA
            for agent in ("oracle", "noop") for m in ("success_rate", "infra_failures", "n_tasks")}


def model_eval(env: str, overrides: list[str], seed: int, work: Path, jobs: int, timeout_s: float) -> dict:
    harness_run([f"env={env}", "agent=model", f"seed={seed}", f"hydra.run.dir={work / 'run'}", *overrides],
                work, timeout_s)
    row = _rows_by(work, "agent").get("model", {})
    return {m: _f(row.get(m)) for m in ("success_rate", "mean_steps", "tokens", "infra_failures")}


def loss_drop(train_log: list[dict]) -> float | None:
    """The smallest first-epoch minus last-epoch loss over the updates that happened (None: none did)."""
    drops = [it["loss_first_epoch"] - it["loss_last_epoch"] for it in train_log
             if it.get("updates") and "loss_first_epoch" in it]
    return min(drops) if drops else NA


def _smoke_one(env: str, signal: str, overrides: list[str], seed: int, work: Path, timeout_s: float) -> dict:
    harness_run([f"env={env}", "agent=model", "mode=train", f"signal={signal}", f"seed={seed}",
                 f"hydra.run.dir={work / 'run'}", *overrides], work, timeout_s)
    row = _rows_by(work, "signal")[signal]
    run_dir = Path(row["run_dir"])
    metrics = json.loads((run_dir / "metrics.json").read_text())
    for big in ("weights", "checkpoint"):  # ~0.5 and ~1.5 GB; everything checked is in metrics.json
        shutil.rmtree(run_dir / big, ignore_errors=True)
    return {f"{signal}.train_samples": _f(row["train_samples"]),
            f"{signal}.loss_drop": loss_drop(metrics.get("train_log", [])),
            f"{signal}.infra_failures": _f(row["infra_failures"])}


def train_smoke(env: str, overrides: list[str], seed: int, work: Path, jobs: int, timeout_s: float,
                signals: dict[str, list[str]]) -> dict:
    """One training run per signal (each may add overrides, e.g. its judge), `jobs` at a time."""
    out: dict[str, float | None] = {}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
        futs = {sig: ex.submit(_smoke_one, env, sig, [*overrides, *(extra or [])], seed, work / sig, timeout_s)
                for sig, extra in signals.items()}
        errors = []
        for sig, fut in futs.items():
            try:
                out.update(fut.result())
            except RunFailed as e:
                errors.append(f"{sig}: {e}")
    if errors:
        raise RunFailed("\n".join(errors))
    return out


CHECKS = {"validity": validity, "model_eval": model_eval, "train_smoke": train_smoke}


def run_check(env: str, check: str, spec: dict, seed: int, work: Path, jobs: int, timeout_s: float) -> CheckRun:
    overrides = list(spec.get("overrides", []))
    extra = {"signals": {sig: list(o or []) for sig, o in spec["signals"].items()}} if check == "train_smoke" else {}
    ident = overrides + [f"{sig}:[{','.join(o)}]" for sig, o in extra.get("signals", {}).items()] + [f"seed={seed}"]
    t0 = time.monotonic()
    try:
        metrics = CHECKS[check](env, overrides, seed, work, jobs, timeout_s, **extra)
        return CheckRun(env, check, ident, metrics, time.monotonic() - t0)
    except RunFailed as e:
        return CheckRun(env, check, ident, {}, time.monotonic() - t0, error=str(e))
