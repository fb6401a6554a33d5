"""`python -m harness.general <sweep dir or scores.csv>... --out results/general`: the general-agent
signal comparison (terminal, GUI, tool-call), shaped like the personal-agent report.

Every evaluation of every training run on a general-agent env becomes a row of `scores.csv` (env,
suite, signal, judge, seed, updates, score): the share of the env's held-out instances solved by the
greedy policy after that many updates. From those rows alone come `table.md` (per env, signal and
judge: the score at 0, 8 and 16 updates, mean ± 95% CI over seeds, and the Δ paired by seed against
outcome reward; the paper's claim, outcome + process reward beats outcome alone, is the `prm` row's
Δ) and `curves.png` (one panel per env).
"""
from __future__ import annotations

import argparse
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


def general_signal_name(cfg: dict) -> str:
    """The signal's label; a judged signal whose votes are the advantage (`baseline: none`, no outcome
    term, no standardization; `signal=prm_votes`) is `<name>_votes`, and the votes centred on the update's
    mean (`baseline: batch`; `signal=prm_centered`) `<name>_centered`, and the votes added to the episode's
    GRPO outcome advantage (`baseline: grpo`; `signal=prm_grpo`) `<name>_grpo`: arms apart from the paper's
    stepwise reward. A k3 penalty to the start (`mode.kl_coef` > 0) adds `+kl<coef>`, and a trained stop
    token (`mode.train_stop_token`, which the committed grids leave out) `+stop`: other arms too. The KL
    arms update on 8 instances x 4 rollouts (conf/experiment/general_*_kl.yaml); a KL run of another
    size adds `+<instances>x<rollouts>`, so that it is not filed in their rows."""
    sig = cfg["signal"]
    judged = get_signal(sig["name"]).needs_judge
    variants = {"none": "_votes", "batch": "_centered", "grpo": "_grpo"}
    variant = variants.get(sig.get("baseline", "stepwise"), "") if judged else ""
    mode = cfg.get("mode") or {}
    kl = float(mode.get("kl_coef") or 0.0)
    stop = "+stop" if mode.get("train_stop_token") else ""
    size = (mode.get("tasks_per_iter"), mode.get("group_size"))
    other_size = f"+{size[0]}x{size[1]}" if kl > 0 and None not in size and size != KL_ARM_UPDATE else ""
    return signal_name(cfg) + variant + (f"+kl{kl:g}" if kl > 0 else "") + stop + other_size


def collect(inputs: list[Path]) -> list[dict]:
    """Rows from run or sweep dirs and earlier scores.csv files; one evaluation seen twice is an error."""
    rows = [r for path in inputs for r in read_scores(path, run_scores, _SCORE_COLUMNS, "general scores.csv")]
    return unique_scores(rows, ("env", "suite"))


PHASES = ("rollout_s", "judge_s", "hints_s", "teacher_s", "reference_s", "update_s", "publish_s")


def _with_reference(entry: dict) -> dict:
    """The entry with `reference_s`: the feedback phase (`signal_s`) less its judge, hints and teacher,
    i.e. the KL reference's scoring (`mode.kl_coef` > 0) and the samples' assembly."""
    rest = (entry.get("signal_s") or 0.0) - sum(entry.get(k) or 0.0 for k in ("judge_s", "hints_s", "teacher_s"))
    return {**entry, "reference_s": max(0.0, rest)}


def phase_table(rows: list[dict]) -> str:
    """Markdown: per env, signal and judge (a model judge's seconds are its own), the median seconds of
    each phase of an update over every update of the runs the rows came from (their train_log.jsonl,
    where the run dir is still there), and the median held-out evaluation. What a user's wall clock
    goes to, measured by the grid itself."""
    logs: dict[tuple[str, str, str], list[dict]] = {}
    for run in sorted({(r["env"], r["signal"], r["judge"], r["run_dir"]) for r in rows}):
        log = Path(run[3]) / "train_log.jsonl"
        if log.is_file():
            logs.setdefault(run[:3], []).extend(_with_reference(json.loads(x))
                                                for x in log.read_text().splitlines() if x.strip())
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


def judge_table(rows: list[dict]) -> str:
    """Markdown: for each run that read a judge, how its -1 compared with the env's step labels over the
    steps it trained on: the share of -1s on a wrong step (precision) and of wrong steps given a -1
    (recall). From metrics.json once the run is done, from its checkpoint's (score, label) pairs while
    it runs; the oracle reads 1.00 and 1.00 by construction, a model judge says what its feedback is worth."""
    out = []
    for env, signal, judge, seed, run_dir in sorted({(r["env"], r["signal"], r["judge"], r["seed"], r["run_dir"])
                                                    for r in rows if r["judge"] != "-" and r.get("run_dir")}):
        metrics, state = Path(run_dir) / "metrics.json", Path(run_dir) / "checkpoint" / "state.json"
        if metrics.is_file():
            m = json.loads(metrics.read_text())
            acc = {"precision": m.get("judge_neg_precision"), "recall": m.get("judge_neg_recall"),
                   "n": m.get("judge_labeled_steps")}
        elif state.is_file():
            acc = judge_accuracy(json.loads(state.read_text()).get("judge_pairs", []))
        else:
            continue
        if acc["n"]:
            share = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
            out.append(f"| {env} | {signal} | {judge} | {seed} | {acc['n']} | {share(acc['precision'])} | "
                       f"{share(acc['recall'])} |")
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


def write(rows: list[dict], out: Path) -> str:
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "scores.csv", _csv(rows, COLUMNS, COLUMNS[:6]))
    md = table(rows, setting="env")
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
    args = ap.parse_args(argv)
    rows = collect(args.inputs)
    if not rows:
        raise SystemExit(f"error: no general-agent training runs with an evaluation in {[str(p) for p in args.inputs]}")
    print(write(rows, args.out))
    print(f"[general] {len(rows)} scores -> {args.out}/scores.csv, table.md, curves.png")
    return 0
