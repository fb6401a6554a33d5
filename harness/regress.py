"""`python -m harness.regress`: the CI regression benchmark.

Runs the checks of conf/regress/<config>.yaml (harness/regress_checks.py) for every env that envs.ENVS
registers, compares each metric with results/baselines/<env>.csv under that metric's tolerance, prints
one table (env, check, metric, baseline, now, tolerance, status) and exits 1 on any regression.
`--update` records what it measured as the new baselines (`--repeat N` runs each check N times and
records the mean and every value, which is how the bands were set: results/README.md); it refuses
when an absolute expectation (oracle solves everything, the loss drops) does not hold.
"""
from __future__ import annotations

import argparse
import csv
import datetime as dt
import io
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from harness.regress_checks import CHECKS, CheckRun, run_check
from nextstate.atomic import write_text_atomic
from nextstate.config import CONF_DIR, REPO_ROOT

BASELINE_COLUMNS = ["check", "metric", "baseline", "runs", "values", "overrides", "updated", "git_commit"]


@dataclass(frozen=True)
class Tolerance:
    kind: str  # exact | band | equals | above
    value: float = 0.0

    @classmethod
    def parse(cls, spec, where: str) -> "Tolerance":
        if spec == "exact":
            return cls("exact")
        if isinstance(spec, dict) and len(spec) == 1:
            (kind, value), = spec.items()
            if kind in ("band", "equals", "above"):
                return cls(kind, float(value))
        raise ValueError(f"{where}: tolerance {spec!r} is not one of exact, {{band: x}}, {{equals: x}}, {{above: x}}")

    @property
    def absolute(self) -> bool:
        """Holds whatever the baseline says (so --update must not record a violation)."""
        return self.kind in ("equals", "above")

    def holds_regardless(self, now: float | None) -> bool:
        """An absolute expectation, judged without history (what --update insists on)."""
        return self.absolute and self.holds(None, now)

    def holds(self, baseline: float | None, now: float | None) -> bool:
        if now is None:  # N/A now: fine only if it was N/A when the baseline was recorded
            return baseline is None and self.kind != "equals"
        if self.kind == "equals":
            return now == self.value
        if self.kind == "above":
            return now > self.value
        if baseline is None:
            return False
        if self.kind == "exact":
            return now == baseline
        return abs(now - baseline) <= self.value + 1e-9

    def __str__(self) -> str:
        return {"exact": "exact", "band": f"±{self.value:g}", "equals": f"= {self.value:g}",
                "above": f"> {self.value:g}"}[self.kind]


@dataclass
class Result:
    env: str
    check: str
    metric: str
    baseline: float | None
    now: float | None
    tolerance: Tolerance | None
    ok: bool
    note: str = ""
    stale: bool = False  # the baseline was recorded with other settings


def load_config(name_or_path: str):
    path = Path(name_or_path)
    if not path.suffix:
        path = CONF_DIR / "regress" / f"{name_or_path}.yaml"
    return OmegaConf.to_container(OmegaConf.load(path), resolve=True), path


def tolerance_for(cfg: dict, env: str, check: str, metric: str) -> Tolerance | None:
    """The env's own tolerance for the metric if it has one, else the default; full name first
    (`prm.loss_drop`), then the name without its prefix (`loss_drop`)."""
    suffix = metric.split(".", 1)[-1]
    for table in ((cfg["envs"][env].get("tolerances") or {}).get(check) or {}, cfg["tolerances"].get(check) or {}):
        for key in (metric, suffix):
            if key in table:
                return Tolerance.parse(table[key], f"tolerances.{check}.{key}")
    return None


# ---- baselines: one CSV per env, one row per (check, metric)

def _fmt(x: float | None) -> str:
    if x is None:
        return "N/A"
    return str(int(x)) if float(x).is_integer() else f"{x:.6g}"


def _parse(x: str) -> float | None:
    return None if x in ("", "N/A") else float(x)


def read_baselines(path: Path) -> dict[tuple[str, str], dict]:
    if not path.exists():
        return {}
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in ("check", "metric", "baseline") if c not in (reader.fieldnames or [])]
        if missing:
            raise SystemExit(f"{path}: line 1: header lacks columns {missing}")
        out = {}
        for row in reader:
            try:
                row["value"] = _parse(row["baseline"])
            except (TypeError, ValueError):
                raise SystemExit(f"{path}: line {reader.line_num}: baseline {row['baseline']!r} "
                                 "is not a number") from None
            out[(row["check"], row["metric"])] = row
        return out


def write_baselines(path: Path, runs_by_check: dict[str, list[CheckRun]], keep: dict[tuple[str, str], dict]) -> None:
    """Baselines of the checks just run (mean over repeats, every value listed); rows of checks that
    were not run this time are kept as they were."""
    from nextstate.leaderboard import git_commit

    rows = [r for (check, _), r in keep.items() if check not in runs_by_check]
    today, commit = dt.date.today().isoformat(), git_commit()
    for check, runs in runs_by_check.items():
        for metric in runs[0].metrics:
            values = [r.metrics.get(metric) for r in runs]
            nums = [v for v in values if v is not None]
            mean = statistics.fmean(nums) if len(nums) == len(values) else None
            rows.append({"check": check, "metric": metric, "baseline": _fmt(mean), "runs": str(len(runs)),
                         "values": ";".join(_fmt(v) for v in values), "overrides": " ".join(runs[0].overrides),
                         "updated": today, "git_commit": commit})
    order = list(CHECKS)
    rows.sort(key=lambda r: (order.index(r["check"]) if r["check"] in order else 99, r["metric"]))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=BASELINE_COLUMNS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    write_text_atomic(path, buf.getvalue())


# ---- comparison

def merge_runs(runs: list[CheckRun]) -> CheckRun:
    """Repeats of one check as one: each metric's mean (N/A if any repeat had none), the first error."""
    if len(runs) == 1:
        return runs[0]
    error = next((r.error for r in runs if r.error), None)
    metrics = {}
    for m in runs[0].metrics:
        vals = [r.metrics.get(m) for r in runs]
        metrics[m] = statistics.fmean(vals) if all(v is not None for v in vals) else None
    return CheckRun(runs[0].env, runs[0].check, runs[0].overrides, {} if error else metrics,
                    sum(r.wall_s for r in runs), error)


def compare(cfg: dict, run: CheckRun, baselines: dict[tuple[str, str], dict], baseline_path: Path) -> list[Result]:
    if run.error:
        return [Result(run.env, run.check, "(run)", None, None, None, False, run.error.splitlines()[0])]
    out = []
    for metric, now in run.metrics.items():
        tol = tolerance_for(cfg, run.env, run.check, metric)
        base = baselines.get((run.check, metric))
        if tol is None:
            out.append(Result(run.env, run.check, metric, base and base["value"], now, None, False,
                              f"no tolerance in conf/regress for {run.check}.{metric}"))
        elif base is None and not tol.absolute:
            out.append(Result(run.env, run.check, metric, None, now, tol, False,
                              f"no baseline in {baseline_path}: run --update --env {run.env}"))
        else:
            b = base["value"] if base else None
            stale = bool(base and base.get("overrides") and base["overrides"] != " ".join(run.overrides))
            note = f"baseline recorded with other settings ({base['overrides']}): run --update" if stale else ""
            out.append(Result(run.env, run.check, metric, b, now, tol, tol.holds(b, now) and not stale, note, stale))
    return out


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
        table.add_row(r.env, r.check, r.metric, _fmt(r.baseline), _fmt(r.now), str(r.tolerance or "-"), status)
    Console(width=160).print(table)


def main(argv: list[str] | None = None) -> int:
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
        baseline_path = baselines_dir / f"{env}.csv"
        baselines = read_baselines(baseline_path)
        done: dict[str, list[CheckRun]] = {}
        for check in CHECKS:
            if check not in spec or (args.check and check not in args.check):
                continue
            runs = []
            for i in range(args.repeat):
                print(f"[regress] {env}/{check}" + (f" (run {i + 1}/{args.repeat})" if args.repeat > 1 else ""),
                      end=" ... ", flush=True)
                run = run_check(env, check, spec[check], cfg["seed"], work / env / f"{check}{i or ''}",
                                cfg["jobs"], cfg["timeout_s"])
                print(f"{run.wall_s:.0f} s" + (f" FAILED: {run.error}" if run.error else ""), flush=True)
                runs.append(run)
            done[check] = runs
            results += compare(cfg, merge_runs(runs), baselines, baseline_path)
        if args.update and done:
            # every repeat must meet the absolute expectations, not just their mean
            every = [r for runs in done.values() for run in runs for r in compare(cfg, run, {}, baseline_path)]
            broken = [r for r in every if r.metric == "(run)"
                      or (r.tolerance and r.tolerance.absolute and not r.tolerance.holds_regardless(r.now))]
            if broken:
                refused = True
                print(f"[regress] {env}: NOT updating {baseline_path}: "
                      + "; ".join(f"{r.check} {r.metric} = {_fmt(r.now)} (must be {r.tolerance})" if r.tolerance
                                  else f"{r.check} failed: {r.note}" for r in broken))
            else:
                write_baselines(baseline_path, done, baselines)
                print(f"[regress] {env}: wrote {baseline_path}")
                _print_spread(cfg, env, done)
    wall = time.monotonic() - t_start
    failed = [r for r in results if not r.ok]
    if args.update:
        print_table(results, f"measured, compared with the previous baselines ({wall:.0f} s)", update=True)
        return 1 if refused else 0
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


if __name__ == "__main__":
    sys.exit(main())
