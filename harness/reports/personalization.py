"""`python -m harness.personalization <sweep dir>... --out results/personalization`: the personal-agent
experiment's results, shaped like the paper's table.

Every evaluation of every finished or running training run on a persona (`env.persona`) becomes a
row of `scores.csv` (persona, signal, judge, seed, updates, score, ...): the held-out score after that
many updates, the share of test requests whose first greedy reply met every preference. From those
rows alone (so the table can be recomputed) come `table.md`: the score at 8 and 16 updates per signal
and judge, mean ± 95% CI over seeds and the paired Δ against outcome reward of the same seed; and
`curves.png`: the mean score against updates, one line per (signal, judge). Beside the score, each
preference on its own (the rate of each preference): `wants.csv` (one row per evaluation
and preference, read from the runs' saved first replies), a table under the score's in `table.md`,
and `wants.png`. A score that stays flat while one preference goes from 3 to 28 of 30 is learning the
score cannot show; the per-preference rates show it, and which preference holds the score down.

`judge` is the feedback a run learned from (aggregate.feedback): `oracle` (the user's own verdict, and
their complaint as the hint), `model` (the policy's initial checkpoint as the judge and hint extractor),
`model (sft)` (that checkpoint fine-tuned as judge and hint extractor by mode=sft_judge)
or `-` (outcome reward, which reads no judge: its runs are the baseline of both arms).
"""
from __future__ import annotations

import argparse
import csv
import io
import json
from pathlib import Path
from typing import Callable

from harness.reports.aggregate import BASELINE_SIGNAL, Stat, by_seed, feedback, paired_deltas, signal_rank
from harness.reports.plots import score_curves, want_curves
from nextstate.atomic import write_text_atomic
from trainers.signals import get_signal

COLUMNS = ("persona", "signal", "judge", "seed", "updates", "score", "run_dir")
WANT_COLUMNS = ("persona", "signal", "judge", "seed", "updates", "want", "rate", "run_dir")


def feedback_label(cfg: dict) -> str:
    """Which feedback a run learned from, read from its composed config; `model (sft)` where the model
    judge is a trained checkpoint (`judge.model`, mode=sft_judge), not the policy's initial one."""
    kind = get_signal(cfg["signal"]["name"])
    label = feedback(cfg["judge"]["name"] if kind.needs_judge else "-",
                     cfg["hints"]["name"] if kind.needs_hints else "-")
    return "model (sft)" if label == "model" and cfg["judge"].get("model") else label


def signal_name(cfg: dict) -> str:
    sig = cfg["signal"]
    hinted = get_signal(sig["name"]).needs_hints
    label = sig["name"] + (f"+top{sig['opd_topk']}" if hinted and sig.get("opd_topk") else "")
    return label + (f"+first{sig['opd_positions']}" if hinted and sig.get("opd_positions") else "")


def _points(run_dir: Path) -> dict[int, float]:
    """Updates -> held-out score, from metrics.json (finished) or the train log and checkpoint (running)."""
    points: dict[int, float] = {}
    metrics_file = run_dir / "metrics.json"
    if metrics_file.exists():
        m = json.loads(metrics_file.read_text())
        points[0], points[m["iterations"]] = m["success_before"], m["success_after"]
        log = m.get("train_log", [])
    else:
        log_file = run_dir / "train_log.jsonl"
        log = [json.loads(x) for x in log_file.read_text().splitlines() if x.strip()] if log_file.exists() else []
        state = run_dir / "checkpoint" / "state.json"
        if state.exists():
            points[0] = json.loads(state.read_text())["success_before"]
    for entry in log:
        if "eval_success" in entry:
            points[entry["iteration"] + 1] = entry["eval_success"]
    return points


def run_scores(run_dir: Path) -> list[dict]:
    """(updates, score) of every evaluation a persona training run has made so far."""
    import yaml

    cfg_file = run_dir / ".hydra" / "config.yaml"
    if not cfg_file.exists():
        return []
    cfg = yaml.safe_load(cfg_file.read_text())
    persona = (cfg.get("env") or {}).get("persona")
    if not persona or (cfg.get("mode") or {}).get("name") != "train":
        return []
    base = {"persona": persona, "signal": signal_name(cfg), "judge": feedback_label(cfg), "seed": cfg["seed"],
            "run_dir": str(run_dir)}
    return [{**base, "updates": u, "score": round(s, 4)} for u, s in sorted(_points(run_dir).items())
            if s is not None]


def _eval_files(run_dir: Path, iterations: int) -> list[tuple[int, Path]]:
    """(updates, episodes file) of every evaluation a run saved."""
    files = [(0, run_dir / "eval_before.jsonl"), (iterations, run_dir / "eval_after.jsonl")]
    files += [(int(p.stem.removeprefix("eval_it")), p) for p in run_dir.glob("eval_it*.jsonl")
              if p.stem.removeprefix("eval_it").isdigit()]
    return sorted((u, p) for u, p in files if p.exists())


def want_rates(episodes_file: Path) -> dict[str, float]:
    """Preference -> the share of graded episodes whose first reply met it (infra failures left out)."""
    met: dict[str, list[bool]] = {}
    for line in episodes_file.read_text().splitlines():
        ep = json.loads(line) if line.strip() else {}
        if ep.get("infra_failure"):
            continue
        for want, ok in ((ep.get("info") or {}).get("first_reply_wants") or {}).items():
            met.setdefault(want, []).append(bool(ok))
    return {w: round(sum(v) / len(v), 4) for w, v in met.items()}


def run_wants(run_dir: Path) -> list[dict]:
    """One row per (evaluation, preference) of a persona training run."""
    import yaml

    cfg_file = run_dir / ".hydra" / "config.yaml"
    if not cfg_file.exists():
        return []
    cfg = yaml.safe_load(cfg_file.read_text())
    persona = (cfg.get("env") or {}).get("persona")
    if not persona or (cfg.get("mode") or {}).get("name") != "train":
        return []
    base = {"persona": persona, "signal": signal_name(cfg), "judge": feedback_label(cfg), "seed": cfg["seed"],
            "run_dir": str(run_dir)}
    return [{**base, "updates": u, "want": w, "rate": r}
            for u, f in _eval_files(run_dir, int(cfg["mode"]["iterations"])) for w, r in want_rates(f).items()]


_SCORE_COLUMNS = {"persona", "signal", "judge", "seed", "updates", "score"}


def _run_dirs(path: Path) -> list[Path]:
    """A run dir itself, or the run dirs one level below a sweep dir."""
    if (path / ".hydra" / "config.yaml").exists():
        return [path]
    return sorted(p.parent.parent for p in path.glob("*/.hydra/config.yaml"))


def _read_wants(path: Path) -> list[dict]:
    """Want rows from a run or sweep dir, or from the wants.csv beside a scores.csv (none if it has none)."""
    if path.is_dir():
        return [r for d in _run_dirs(path) for r in run_wants(d)]
    beside = path.with_name("wants.csv")
    if not beside.exists():
        return []
    with open(beside, newline="") as f:
        return [{**r, "seed": int(r["seed"]), "updates": int(r["updates"]), "rate": float(r["rate"])}
                for r in csv.DictReader(f)]


def collect_wants(inputs: list[Path]) -> list[dict]:
    return [r for path in inputs for r in _read_wants(path)]


def read_scores(path: Path, run_scores: Callable[[Path], list[dict]], required: set[str] = _SCORE_COLUMNS,
                kind: str = "scores.csv") -> list[dict]:
    """Score rows from a `scores.csv` (it must have the `required` columns), or from a run or sweep dir
    through `run_scores` (one run dir's rows). Shared by the personal- and general-agent reports."""
    if path.is_file():
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            if not required <= set(reader.fieldnames or ()):
                raise SystemExit(f"error: {path} is not a {kind} (it needs the columns {sorted(required)})")
            return [{**r, "seed": int(r["seed"]), "updates": int(r["updates"]), "score": float(r["score"])}
                    for r in reader]
    if path.is_dir():
        return [r for d in _run_dirs(path) for r in run_scores(d)]
    raise SystemExit(f"error: {path} is neither a run dir, a sweep dir nor a scores.csv")


def unique_scores(rows: list[dict], setting: tuple[str, ...]) -> list[dict]:
    """The rows, after checking that no (setting..., signal, judge, updates) holds a seed twice: one
    evaluation read from two places is an error, not a silent double count."""
    def twice(key, seed, first, again):
        raise SystemExit(f"error: {(*key[:-1], seed, key[-1])} is in both {first['run_dir']} and {again['run_dir']}")

    by_seed(rows, key=lambda r: (*(r[c] for c in setting), r["signal"], r["judge"], r["updates"]),
            seed=lambda r: r["seed"], on_repeat=twice)
    return rows


def collect(inputs: list[Path]) -> list[dict]:
    """Rows from sweep dirs (each run a sub dir) and from earlier `scores.csv` files."""
    return unique_scores([r for path in inputs for r in read_scores(path, run_scores)], ("persona",))


def _at(rows: list[dict], updates: int, setting: str = "persona") -> dict[tuple[str, str, str], dict[int, float]]:
    """(setting, signal, judge) -> seed -> score, at `updates` updates; the setting is the persona, or
    the env of a general-agent run."""
    groups = by_seed([r for r in rows if r["updates"] == updates], seed=lambda r: r["seed"],
                     key=lambda r: (r[setting], r["signal"], r["judge"]))
    return {k: {s: r["score"] for s, r in seeds.items()} for k, seeds in groups.items()}


def _fmt(stat: Stat | None) -> str:
    if stat is None:
        return "-"
    return f"{stat.mean:.2f}" + (f" ± {stat.half:.2f}" if stat.half is not None else "") + f" (n={stat.n})"


def _baselines(keys: set[tuple[str, str, str]]) -> dict[tuple[str, str, str], str]:
    """Per (setting, signal, judge): the outcome run it is paired against. An arm's suffix (`+kl0.2`,
    `+stop`: the update, not the signal) picks outcome of the same arm where one ran, so that the Δ is
    the signal's alone; otherwise plain outcome."""
    ran = {(k[0], k[1]) for k in keys if k[2] == "-"}
    out = {}
    for setting, signal, judge in keys:
        arm = signal.partition("+")[2]
        same_arm = f"{BASELINE_SIGNAL}+{arm}" if arm else BASELINE_SIGNAL
        out[(setting, signal, judge)] = same_arm if (setting, same_arm) in ran else BASELINE_SIGNAL
    return out


def table(rows: list[dict], at: tuple[int, ...] | None = None, setting: str = "persona") -> str:
    """Markdown: per setting (persona or env), signal and judge, the score before training and at `at` updates
    (mean ± 95% CI over seeds), and the paired Δ against outcome reward of the same seed (and of the
    same arm where one ran, named in the cell: `_baselines`). By default
    the paper's columns, 8 and 16 updates, where runs reached them (else the furthest they reached)."""
    reached = {r["updates"] for r in rows}
    at = at or tuple(u for u in (8, 16) if u in reached) or (max(reached),)
    scores = {u: _at(rows, u, setting) for u in (0, *at)}
    baseline_of = _baselines({k for by_key in scores.values() for k in by_key})
    deltas = {u: paired_deltas(scores[u], is_baseline=lambda k: k[1] == baseline_of[k] and k[2] == "-",
                               pair_key=lambda k: (k[0], baseline_of[k])) for u in at}
    cols = [f"score @{u}" for u in at] + [f"Δ vs outcome @{u}" for u in at]
    out = io.StringIO()
    out.write(f"| {setting} | signal | judge | seeds | score @0 | " + " | ".join(cols) + " |\n")
    out.write("|" + "---|" * (5 + len(cols)) + "\n")
    keys = sorted({k for by_key in scores.values() for k in by_key},
                  key=lambda k: (k[0], k[2] != "-", k[2], signal_rank(k[1]), k[1]))
    for key in keys:
        cells = [_fmt(Stat.of_any(scores[u].get(key, {}).values())) for u in at]
        against = "" if baseline_of[key] == BASELINE_SIGNAL else f" vs {baseline_of[key]}"
        cells += [_fmt(Stat.of_any(deltas[u].get(key, []))) + (against if key in deltas[u] else "")
                  for u in at]
        seeds = len({r["seed"] for r in rows if (r[setting], r["signal"], r["judge"]) == key})
        out.write(f"| {' | '.join(key)} | {seeds} | {_fmt(Stat.of_any(scores[0].get(key, {}).values()))} | "
                  + " | ".join(cells) + " |\n")
    return out.getvalue()


def _mean_cell(by_seed_rate: dict[int, float]) -> str:
    if not by_seed_rate:
        return "-"
    n = len(by_seed_rate)
    return f"{sum(by_seed_rate.values()) / n:.2f}" + (f" (n={n})" if n > 1 else "")


def wants_table(wants: list[dict]) -> str:
    """Markdown: per persona, signal, judge and preference, the share of held-out first replies that
    met it at each evaluation (mean over the seeds that have it)."""
    if not wants:
        return ""
    groups: dict[tuple[str, str, str, str], dict[int, dict[int, float]]] = {}
    for r in wants:
        groups.setdefault((r["persona"], r["signal"], r["judge"], r["want"]), {}).setdefault(
            r["updates"], {})[r["seed"]] = r["rate"]
    at = sorted({u for g in groups.values() for u in g})
    out = io.StringIO()
    out.write("| persona | signal | judge | preference | " + " | ".join(f"@{u}" for u in at) + " |\n")
    out.write("|" + "---|" * (4 + len(at)) + "\n")
    for key in sorted(groups, key=lambda k: (k[0], k[2] != "-", k[2], signal_rank(k[1]), k[1])):
        cells = [_mean_cell(groups[key].get(u, {})) for u in at]
        out.write(f"| {' | '.join(key)} | " + " | ".join(cells) + " |\n")
    return out.getvalue()


def _csv(rows: list[dict], columns: tuple[str, ...], sort_by: tuple[str, ...]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows(sorted(rows, key=lambda r: tuple(str(r[k]).zfill(4) for k in sort_by)))
    return buf.getvalue()


def write(rows: list[dict], out: Path, wants: list[dict] | None = None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "scores.csv", _csv(rows, COLUMNS, COLUMNS[:5]))
    md = table(rows)
    if wants:
        write_text_atomic(out / "wants.csv", _csv(wants, WANT_COLUMNS, WANT_COLUMNS[:6]))
        md += ("\n**Per preference**: the share of the held-out first replies that met it (mean over seeds; "
               "`contains_any` is the on-topic gate, `matches` the persona's pattern, e.g. no list):\n\n"
               + wants_table(wants))
        want_curves(wants, out / "wants.png")
    write_text_atomic(out / "table.md", md)
    score_curves(rows, out / "curves.png")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.personalization", description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", type=Path, help="run dirs, sweep dirs and/or earlier scores.csv files")
    ap.add_argument("--out", type=Path, default=Path("results/personalization"))
    args = ap.parse_args(argv)
    rows = collect(args.inputs)
    if not rows:
        raise SystemExit(f"error: no persona training runs with an evaluation in {[str(p) for p in args.inputs]}")
    wants = collect_wants(args.inputs)
    write(rows, args.out, wants)
    print(table(rows))
    if wants:
        print(wants_table(wants))
    print(f"[personalization] {len(rows)} scores -> {args.out}/scores.csv, table.md, curves.png"
          + (f"; {len(wants)} preference rates -> wants.csv, wants.png" if wants else ""))
    return 0
