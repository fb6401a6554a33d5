"""The regression benchmark's numbers: tolerances (conf/regress/<config>.yaml), the baselines on disk
(results/baselines/<env>.csv, one row per check and metric) and a check's metrics compared with them."""
from __future__ import annotations

import csv
import datetime as dt
import io
import statistics
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from harness.regress.checks import CHECKS, CheckRun
from nextstate.atomic import write_text_atomic
from nextstate.config import CONF_DIR

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

def fmt(x: float | None) -> str:
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
            rows.append({"check": check, "metric": metric, "baseline": fmt(mean), "runs": str(len(runs)),
                         "values": ";".join(fmt(v) for v in values), "overrides": " ".join(runs[0].overrides),
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
