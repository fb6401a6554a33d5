"""`python -m harness.general <sweep dir or scores.csv>... --out results/general`: the general-agent
signal comparison (terminal, GUI, tool-call), shaped like the personal-agent report.

Every evaluation of every training run on a general-agent env becomes a row of `scores.csv` (env,
suite, signal, judge, seed, updates, score): the share of the env's held-out instances solved by the
greedy policy after that many updates. From those rows alone come `table.md` (per env, signal and
judge: the score at 0, 8 and 16 updates or `--at`, mean ± 95% CI over seeds, and the Δ paired by seed against
outcome reward; the paper's claim, outcome + process reward beats outcome alone, is the `prm` row's
Δ) and `curves.png` (one panel per env). Beside them, `updates.csv` (each update's seconds by phase)
and `judges.csv` (each judged run's -1 against the step labels) keep what the run dirs said, so a report
rebuilt from its scores.csv on another machine, where those dirs never were, keeps its tables.
"""
from __future__ import annotations

import argparse
import csv
import json
import statistics
from pathlib import Path

from harness.reports.personalization import (
    _csv,
    _points,
    feedback_label,
    read_scores,
    signal_name,
    table,
    unique_scores,
)
from harness.reports.plots import score_curves
from nextstate.atomic import write_text_atomic
from trainers.feedback.judge_accuracy import judge_accuracy
from trainers.signals.registry import get_signal

COLUMNS = ("env", "suite", "signal", "judge", "seed", "updates", "score", "run_dir")
_SCORE_COLUMNS = set(COLUMNS) - {"run_dir"}


def run_scores(run_dir: Path) -> list[dict]:
    """(updates, score) of every evaluation a general-agent training run has made so far."""
    import yaml

    cfg_file = run_dir / ".hydra" / "config.yaml"
    if not cfg_file.exists():
        return []
    cfg = yaml.safe_load(cfg_file.read_text())
    env = cfg.get("env") or {}
    if env.get("name") in (None, "chat") or (cfg.get("mode") or {}).get("name") != "train":
        return []
    base = {"env": env["name"], "suite": env.get("suite", "-"), "signal": general_signal_name(cfg),
            "judge": feedback_label(cfg), "seed": cfg["seed"], "run_dir": str(run_dir)}
    return [{**base, "updates": u, "score": round(s, 4)} for u, s in sorted(_points(run_dir).items())
            if s is not None]


KL_ARM_UPDATE = (8, 4)  # instances x rollouts an update of every committed `+kl` arm
KL_ARM_LR = 2.0e-5      # and their learning rate (cosine to a tenth over the run)


def general_signal_name(cfg: dict) -> str:
    """The signal's label; a judged signal whose votes are the advantage (`baseline: none`, no outcome
    term, no standardization; `signal=prm_votes`) is `<name>_votes`, and the votes centred on the update's
    mean (`baseline: batch`; `signal=prm_centered`) `<name>_centered`, and the votes added to the episode's
    GRPO outcome advantage (`baseline: grpo`; `signal=prm_grpo`) `<name>_grpo`: arms apart from the paper's
    stepwise reward. A k3 penalty to the start (`mode.kl_coef` > 0) adds `+kl<coef>`, and a trained stop
    token (`mode.train_stop_token`, which the committed grids leave out) `+stop`: other arms too. The KL
    arms update on 8 instances x 4 rollouts (conf/experiment/general_*_kl.yaml); a KL run of another
    size adds `+<instances>x<rollouts>`, one at another learning rate `+lr<lr>`, and one whose first
    optimizer steps warm up `+warmup<steps>`, so that it is not filed in their rows."""
    sig = cfg["signal"]
    judged = get_signal(sig["name"]).needs_judge
    variants = {"none": "_votes", "batch": "_centered", "grpo": "_grpo"}
    variant = variants.get(sig.get("baseline", "stepwise"), "") if judged else ""
    mode = cfg.get("mode") or {}
    kl = float(mode.get("kl_coef") or 0.0)
    stop = "+stop" if mode.get("train_stop_token") else ""
    size = (mode.get("tasks_per_iter"), mode.get("group_size"))
    other_size = f"+{size[0]}x{size[1]}" if kl > 0 and None not in size and size != KL_ARM_UPDATE else ""
    lr = mode.get("lr")
    other_lr = f"+lr{float(lr):g}" if kl > 0 and lr is not None and float(lr) != KL_ARM_LR else ""
    warmup = int(mode.get("lr_warmup_steps") or 0)
    warm = f"+warmup{warmup}" if kl > 0 and warmup > 0 else ""
    return signal_name(cfg) + variant + (f"+kl{kl:g}" if kl > 0 else "") + stop + other_size + other_lr + warm


RUN_KEY = ("env", "suite", "signal", "judge", "seed")


def collect(inputs: list[Path]) -> list[dict]:
    """Rows from run or sweep dirs and earlier scores.csv files. A run read here replaces an earlier
    report's rows of the same run, and of the same arm and seed run elsewhere (the run read now is the
    one rerun, resumed or gone further; the one replaced is named), so rebuilding a report from its
    scores.csv plus new runs never counts a seed twice. Two runs read here with one evaluation in
    common, or two reports with one, are an error."""
    fresh, earlier = [], []
    for path in inputs:
        got = read_scores(path, run_scores, _SCORE_COLUMNS, "general scores.csv")
        if path.is_file():  # a row from an earlier report remembers it: its seconds and judge rows lie beside it
            earlier += [{**r, "report_dir": str(path.parent)} for r in got]
        else:
            fresh += got
    unique_scores(fresh, ("env", "suite"))
    run_key = lambda r: tuple(r[k] for k in RUN_KEY)  # noqa: E731
    read_now = {run_key(r): r["run_dir"] for r in fresh}
    kept, replaced = [], set()
    for r in earlier:
        now = read_now.get(run_key(r))
        if now is None:
            kept.append(r)
        elif now != r.get("run_dir"):
            replaced.add((r.get("run_dir"), now))
    for old, now in sorted(replaced):
        print(f"[general] {old} (in an earlier report) is replaced by {now}: the same arm and seed")
    return unique_scores(fresh + kept, ("env", "suite"))


PHASES = ("rollout_s", "judge_s", "hints_s", "teacher_s", "reference_s", "update_s", "publish_s")


def _with_reference(entry: dict) -> dict:
    """The entry with `reference_s`: the feedback phase (`signal_s`) less its judge, hints and teacher,
    i.e. the KL reference's scoring (`mode.kl_coef` > 0) and the samples' assembly."""
    rest = (entry.get("signal_s") or 0.0) - sum(entry.get(k) or 0.0 for k in ("judge_s", "hints_s", "teacher_s"))
    return {**entry, "reference_s": max(0.0, rest)}


UPDATE_COLUMNS = ("env", "signal", "judge", "seed", "run_dir", "iteration", "samples", *PHASES, "eval_s")
JUDGE_COLUMNS = ("env", "signal", "judge", "seed", "run_dir", "labelled_steps", "neg_precision", "neg_recall")


def _runs(rows: list[dict]) -> list[tuple]:
    return sorted({(r["env"], r["signal"], r["judge"], r["seed"], r["run_dir"]) for r in rows if r.get("run_dir")})


def _earlier(rows: list[dict], name: str) -> dict[str, list[dict]]:
    """The rows of `name` (updates.csv, judges.csv) beside each earlier scores.csv the rows came from,
    by run dir."""
    found: dict[str, list[dict]] = {}
    for report in sorted({r["report_dir"] for r in rows if r.get("report_dir")}):
        f = Path(report) / name
        if f.is_file():
            with open(f, newline="") as fh:
                for r in csv.DictReader(fh):
                    found.setdefault(r["run_dir"], []).append(r)
    return found


def _number(value) -> float | None:
    return None if value in (None, "") else float(value)


def update_rows(rows: list[dict]) -> list[dict]:
    """One row per update of each run the score rows came from: its samples and seconds by phase, and
    the held-out evaluation's seconds where it made one. From the run's train_log.jsonl where the run
    dir is there, else from the updates.csv of the report its scores were read from."""
    earlier = _earlier(rows, "updates.csv")
    out = []
    for env, signal, judge, seed, run_dir in _runs(rows):
        base = {"env": env, "signal": signal, "judge": judge, "seed": seed, "run_dir": run_dir}
        log = Path(run_dir) / "train_log.jsonl"
        if log.is_file():
            entries = [_with_reference(json.loads(x)) for x in log.read_text().splitlines() if x.strip()]
            out += [{**base, "iteration": e.get("iteration", i), "eval_s": e.get("eval_s"),
                     **{k: e.get(k) or 0.0 for k in ("samples", *PHASES)}} for i, e in enumerate(entries)]
        else:
            out += [{**base, "iteration": int(r["iteration"]),
                     **{k: _number(r.get(k)) for k in ("samples", *PHASES, "eval_s")}}
                    for r in earlier.get(run_dir, [])]
    return out


def phase_table(rows: list[dict]) -> str:
    """Markdown: per env, signal and judge (a model judge's seconds are its own), the median seconds of
    each phase of an update over every update of the runs the rows came from (update_rows), and the
    median held-out evaluation. What a user's wall clock goes to, measured by the grid itself."""
    logs: dict[tuple[str, str, str], list[dict]] = {}
    for u in update_rows(rows):
        logs.setdefault((u["env"], u["signal"], u["judge"]), []).append(u)
    if not logs:
        return ""
    out = ["| env | signal | judge | updates | samples | " + " | ".join(p[:-2] for p in PHASES)
           + " | total | eval |", "|" + "---|" * (len(PHASES) + 7)]
    for (env, signal, judge), entries in sorted(logs.items()):
        med = lambda k, es=entries: statistics.median(e.get(k) or 0.0 for e in es)  # noqa: E731
        evals = [e["eval_s"] for e in entries if e.get("eval_s")]
        out.append(f"| {env} | {signal} | {judge} | {len(entries)} | {med('samples'):.0f} | "
                   + " | ".join(f"{med(p):.1f}" for p in PHASES)
                   + f" | {sum(med(p) for p in PHASES):.1f} | {statistics.median(evals) if evals else 0:.0f} |")
    return "\n".join(out) + "\n"


def judge_rows(rows: list[dict]) -> list[dict]:
    """For each run that read a judge, how its -1 compared with the env's step labels over the steps it
    trained on: the share of -1s on a wrong step (precision) and of wrong steps given a -1 (recall). From
    metrics.json once the run is done, from its checkpoint's (score, label) pairs while it runs, and from
    the judges.csv of the report its scores were read from where the run dir is gone."""
    earlier = _earlier(rows, "judges.csv")
    out = []
    for env, signal, judge, seed, run_dir in _runs(rows):
        if judge == "-":
            continue
        base = {"env": env, "signal": signal, "judge": judge, "seed": seed, "run_dir": run_dir}
        metrics, state = Path(run_dir) / "metrics.json", Path(run_dir) / "checkpoint" / "state.json"
        if metrics.is_file():
            m = json.loads(metrics.read_text())
            acc = {"labelled_steps": m.get("judge_labeled_steps"), "neg_precision": m.get("judge_neg_precision"),
                   "neg_recall": m.get("judge_neg_recall")}
        elif state.is_file():
            a = judge_accuracy(json.loads(state.read_text()).get("judge_pairs", []))
            acc = {"labelled_steps": a["n"], "neg_precision": a["precision"], "neg_recall": a["recall"]}
        elif run_dir in earlier:
            r = earlier[run_dir][0]
            acc = {"labelled_steps": int(r["labelled_steps"]), "neg_precision": _number(r["neg_precision"]),
                   "neg_recall": _number(r["neg_recall"])}
        else:
            continue
        if acc["labelled_steps"]:
            out.append({**base, **acc})
    return out


def judge_table(rows: list[dict]) -> str:
    """Markdown of judge_rows: the oracle reads 1.00 and 1.00 by construction, a model judge says what
    its feedback is worth."""
    share = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
    out = [f"| {j['env']} | {j['signal']} | {j['judge']} | {j['seed']} | {j['labelled_steps']} | "
           f"{share(j['neg_precision'])} | {share(j['neg_recall'])} |" for j in judge_rows(rows)]
    if not out:
        return ""
    return "\n".join(["| env | signal | judge | seed | labelled steps | -1 precision | -1 recall |",
                      "|---|---|---|---|---|---|---|", *out]) + "\n"


def infra_failures(rows: list[dict]) -> list[str]:
    """Each held-out evaluation with an infrastructure failure (an episode the env could not run, scored
    0.0): `run_dir @updates: k of n`. Read from the evaluation's episodes (eval_before.jsonl,
    eval_it<N>.jsonl, eval_after.jsonl) where the run dir is still there."""
    found = []
    for run_dir in sorted({r["run_dir"] for r in rows if r.get("run_dir")}):
        d = Path(run_dir)
        updates = sorted(int(r["updates"]) for r in rows if r.get("run_dir") == run_dir)
        for u in updates:
            f = d / ("eval_before.jsonl" if u == 0 else f"eval_it{u}.jsonl")
            if u == updates[-1] and u and not f.exists():  # the last evaluation is the run's final one
                f = d / "eval_after.jsonl"
            if not f.exists():
                continue
            episodes = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
            bad = sum(bool(e.get("infra_failure")) for e in episodes)
            if bad:
                found.append(f"{run_dir} @{u}: {bad} of {len(episodes)}")
    return found


def write(rows: list[dict], out: Path, at: tuple[int, ...] | None = None) -> str:
    """`at`: the table's update columns (default: the paper's 8 and 16, where runs reached them)."""
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "scores.csv", _csv(rows, COLUMNS, COLUMNS[:6]))
    write_text_atomic(out / "updates.csv", _csv(update_rows(rows), UPDATE_COLUMNS, ("run_dir", "iteration")))
    write_text_atomic(out / "judges.csv", _csv(judge_rows(rows), JUDGE_COLUMNS, ("run_dir",)))
    md = table(rows, at=at, setting="env")
    phases = phase_table(rows)
    if phases:
        md += ("\nSeconds per update by phase (median over the runs' updates; eval: one held-out "
               "evaluation):\n\n" + phases)
    judged = judge_table(rows)
    if judged:
        md += ("\nThe judge's -1 against the env's step labels, over each run's training steps:\n\n" + judged)
    broken = infra_failures(rows)
    if broken:  # a score with infra failures counts them as 0.0: say so beside the numbers
        md += ("\nHeld-out evaluations with infrastructure failures (episodes scored 0.0 that never ran):\n\n"
               + "".join(f"- {b}\n" for b in broken))
    write_text_atomic(out / "table.md", md)
    score_curves(rows, out / "curves.png", setting="env", ylabel="held-out success (greedy)",
                 xlabel="updates (each: mode.tasks_per_iter x mode.group_size episodes)")
    return md


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.general", description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", type=Path, help="run dirs, sweep dirs and/or earlier scores.csv files")
    ap.add_argument("--out", type=Path, default=Path("results/general"))
    ap.add_argument("--at", type=int, nargs="+", metavar="UPDATES",
                    help="the table's update columns, e.g. --at 8 12 16 where a pair's outcome run stopped at 12 "
                         "(default: 8 and 16)")
    args = ap.parse_args(argv)
    rows = collect(args.inputs)
    if not rows:
        raise SystemExit(f"error: no general-agent training runs with an evaluation in {[str(p) for p in args.inputs]}")
    reached = {r["updates"] for r in rows}
    for u in args.at or ():
        if u not in reached:
            raise SystemExit(f"error: --at {u}: no run reached {u} updates (evaluated at {sorted(reached)})")
    print(write(rows, args.out, tuple(args.at) if args.at else None))
    print(f"[general] {len(rows)} scores -> {args.out}/scores.csv, table.md, curves.png, updates.csv, judges.csv")
    return 0
