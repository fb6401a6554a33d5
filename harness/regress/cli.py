"""`python -m harness.regress`: the CI regression benchmark.

Runs the checks of conf/regress/<config>.yaml (harness/regress/checks.py) for every env that envs.ENVS
registers, compares each metric with results/baselines/<env>.csv under that metric's tolerance, prints
one table (env, check, metric, baseline, now, tolerance, status) and exits 1 on any regression.
`--update` records what it measured as the new baselines (`--repeat N` runs each check N times and
records the mean and every value, which is how the bands were set: results/README.md); it refuses
when an absolute expectation (oracle solves everything, the loss drops) does not hold.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from harness.regress.baselines import (
    Result,
    compare,
    fmt,
    load_config,
    merge_runs,
    read_baselines,
    tolerance_for,
    write_baselines,
)
from harness.regress.checks import CHECKS, CheckRun, run_check
from nextstate.config import REPO_ROOT


def print_table(results: list[Result], title: str, update: bool = False) -> None:
    """The table a CI log shows. With --update, the status says what the new baseline changes."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for c in ("env", "check", "metric", "baseline", "now", "tolerance", "status"):
        table.add_column(c)
    for r in results:
        if update and r.tolerance is not None and r.tolerance.absolute:
            status = "ok" if r.tolerance.holds_regardless(r.now) else "[bold red]VIOLATED[/]"
        elif update and r.tolerance is not None:
            status = "new" if r.baseline is None else "[yellow]new settings[/]" if r.stale else \
                ("same" if r.ok else "[yellow]changed[/]")
        else:
            status = "ok" if r.ok else f"[bold red]REGRESSION[/] {r.note}".strip()
        table.add_row(r.env, r.check, r.metric, fmt(r.baseline), fmt(r.now), str(r.tolerance or "-"), status)
    Console(width=160).print(table)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m harness.regress", description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="default", help="conf/regress/<name>.yaml, or a path")
    p.add_argument("--env", action="append", help="only this env (repeatable)")
    p.add_argument("--check", action="append", choices=list(CHECKS), help="only this check (repeatable)")
    p.add_argument("--update", action="store_true", help="record the measured metrics as the new baselines")
    p.add_argument("--repeat", type=int, default=1, help="with --update: runs per check (mean recorded)")
    p.add_argument("--workdir", help="scratch results dir (default: a new temp dir, kept for inspection)")
    args = p.parse_args(argv)
    if args.repeat != 1 and not args.update:
        p.error("--repeat goes with --update")
    return args


def _run_repeats(args, cfg: dict, env: str, check: str, spec: dict, work: Path) -> list[CheckRun]:
    runs = []
    for i in range(args.repeat):
        print(f"[regress] {env}/{check}" + (f" (run {i + 1}/{args.repeat})" if args.repeat > 1 else ""),
              end=" ... ", flush=True)
        run = run_check(env, check, spec[check], cfg["seed"], work / env / f"{check}{i or ''}",
                        cfg["jobs"], cfg["timeout_s"])
        print(f"{run.wall_s:.0f} s" + (f" FAILED: {run.error}" if run.error else ""), flush=True)
        runs.append(run)
    return runs


def _update(cfg: dict, env: str, done: dict[str, list[CheckRun]], baselines: dict, baseline_path: Path) -> bool:
    """Record an env's new baselines; False (nothing written) when a run failed or any repeat broke an
    absolute expectation (every repeat must meet them, not just their mean)."""
    every = [r for runs in done.values() for run in runs for r in compare(cfg, run, {}, baseline_path)]
    broken = [r for r in every if r.metric == "(run)"
              or (r.tolerance and r.tolerance.absolute and not r.tolerance.holds_regardless(r.now))]
    if broken:
        print(f"[regress] {env}: NOT updating {baseline_path}: "
              + "; ".join(f"{r.check} {r.metric} = {fmt(r.now)} (must be {r.tolerance})" if r.tolerance
                          else f"{r.check} failed: {r.note}" for r in broken))
        return False
    write_baselines(baseline_path, done, baselines)
    print(f"[regress] {env}: wrote {baseline_path}")
    _print_spread(cfg, env, done)
    return True


def _check_env(args, cfg: dict, env: str, spec: dict, baselines_dir: Path, work: Path) -> tuple[list[Result], bool]:
    """Run one env's checks and compare them; with --update record them. Returns the results and
    whether an update was refused."""
    baseline_path = baselines_dir / f"{env}.csv"
    baselines = read_baselines(baseline_path)
    done: dict[str, list[CheckRun]] = {}
    results: list[Result] = []
    for check in CHECKS:
        if check not in spec or (args.check and check not in args.check):
            continue
        done[check] = _run_repeats(args, cfg, env, check, spec, work)
        results += compare(cfg, merge_runs(done[check]), baselines, baseline_path)
    refused = bool(args.update and done) and not _update(cfg, env, done, baselines, baseline_path)
    return results, refused


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    from envs import ENVS

    cfg, cfg_path = load_config(args.config)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="nextstate-regress-"))
    baselines_dir = Path(cfg["baselines_dir"])
    baselines_dir = baselines_dir if baselines_dir.is_absolute() else REPO_ROOT / baselines_dir
    print(f"[regress] {cfg_path.relative_to(REPO_ROOT) if cfg_path.is_relative_to(REPO_ROOT) else cfg_path}; "
          f"scratch dir {work}", flush=True)
    for env in sorted(set(ENVS) - set(cfg["envs"])):
        print(f"[regress] env {env}: registered but has no entry in {cfg_path.name}; not checked")
    results: list[Result] = []
    refused = False
    t_start = time.monotonic()
    for env, spec in cfg["envs"].items():
        if args.env and env not in args.env:
            continue
        if env not in ENVS:
            print(f"[regress] env {env}: not registered in envs.ENVS; skipped")
            continue
        env_results, env_refused = _check_env(args, cfg, env, spec, baselines_dir, work)
        results += env_results
        refused |= env_refused
    wall = time.monotonic() - t_start
    if args.update:
        print_table(results, f"measured, compared with the previous baselines ({wall:.0f} s)", update=True)
        return 1 if refused else 0
    failed = [r for r in results if not r.ok]
    print_table(results, f"regression check: {len(results) - len(failed)}/{len(results)} ok ({wall:.0f} s)")
    if failed:
        print(f"[regress] {len(failed)} regression(s); to accept a deliberate change: "
              "python -m harness.regress --update", file=sys.stderr)
        return 1
    return 0


def _print_spread(cfg: dict, env: str, done: dict[str, list[CheckRun]]) -> None:
    """With repeats: each band metric's observed range next to its configured band."""
    for check, runs in done.items():
        if len(runs) < 2:
            continue
        for metric in runs[0].metrics:
            vals = [r.metrics.get(metric) for r in runs]
            tol = tolerance_for(cfg, env, check, metric)
            if tol and tol.kind == "band" and all(v is not None for v in vals):
                spread = max(vals) - min(vals)
                flag = "  <-- wider than the band" if spread > tol.value + 1e-9 else ""
                print(f"[regress]   {check} {metric}: values {vals}, range {spread:g}, band ±{tol.value:g}{flag}")
