"""Is the hinted teacher a better policy than the student? OPD moves the student toward what the same
model says with the hint appended (`hints.teacher_suffix`); that only helps where the hint makes the
model's own choice better. For the oracle trajectories of N train instances, every step is decoded
greedily twice from the experiment's start model: from the step's prompt (the student) and from the
prompt with the reference reply as the hint (the teacher), and scored the way the env labels steps
(a call by meaning against the reference call; an answer by its value). Also per step: the mean
per-token log p of the reference reply under each prompt, and their difference (what a hinted OPD
sample that *is* the reference would be pushed by).

    python benchmarks/hinted_teacher.py                         # general_toolcall, 40 train instances
    python benchmarks/hinted_teacher.py --limit 80 hints.teacher_suffix='...{hint}'

The last line is the JSON summary.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import defaultdict
from contextlib import ExitStack
from pathlib import Path

from general_ceiling import oracle_train_trajectories, start_model  # the script beside this one

from agents.factory import serve_policy
from agents.serving.transformers_policy import SamplingConfig
from envs.toolcall.parse import parse_reply
from envs.toolcall.templated import answer_is_correct, same_call
from trainers.feedback.model_judge import teacher_messages


def step_correct(reply: str, reference: str, expect) -> bool:
    ref = parse_reply(reference)
    got = parse_reply(reply)
    if ref.calls:
        return bool(got.calls) and len(got.calls) == len(ref.calls) and all(
            any(same_call(c, r) for r in ref.calls) for c in got.calls)
    return not got.calls and answer_is_correct(reply, expect)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--experiment", default="general_toolcall")
    ap.add_argument("--limit", type=int, default=40, help="train instances (their oracle trajectories)")
    ap.add_argument("overrides", nargs="*", help="more config overrides, e.g. hints.teacher_suffix=...")
    args = ap.parse_args()
    job, mc, path = start_model(args.experiment, args.overrides)
    hints = job.hints
    t0 = time.monotonic()
    run_dir = Path("/tmp/hinted_teacher")
    tasks, trajs, tools = oracle_train_trajectories(job, args.limit, run_dir)
    with ExitStack() as stack:
        policy = stack.enter_context(serve_policy(mc, job.backend, job.paths.cache_dir,
                                                  path=path, log_path=run_dir / "server.log"))
        greedy = SamplingConfig(mc.max_new_tokens, 0.0, 1.0, mc.max_prompt_tokens)
        steps = [(task, step) for task, traj in zip(tasks, trajs) for step in traj.steps]
        prompts = [m for _, step in steps for m in (step.prompt_messages,
                                                    teacher_messages(step, step.action_text, hints.teacher_suffix))]
        # a batch at a time: one request of every prompt would pass the server's request deadline, and
        # a reply past it ends with what it has
        gens = [g for i in range(0, len(prompts), 16) for g in policy.generate(prompts[i:i + 16], tools=tools,
                                                                               sampling=greedy)]
        refs = [policy.tokenizer.encode(step.action_text, add_special_tokens=False) for _, step in steps]
        scored = policy.score_many([(policy.prompt_ids(m, tools), refs[i // 2]) for i, m in enumerate(prompts)])
        rows = []
        for i, (task, step) in enumerate(steps):
            s_gen, t_gen = gens[2 * i], gens[2 * i + 1]
            (s_lp, _), (t_lp, _) = scored[2 * i], scored[2 * i + 1]
            kind = "call" if parse_reply(step.action_text).calls else "answer"
            rows.append({"template": task.tags[1] if len(task.tags) > 1 else "-", "kind": kind,
                         "student": step_correct(s_gen.text, step.action_text, task.data["expect"]),
                         "teacher": step_correct(t_gen.text, step.action_text, task.data["expect"]),
                         "lp_student": statistics.fmean(s_lp), "lp_teacher": statistics.fmean(t_lp),
                         "teacher_reply": t_gen.text[:120]})
    groups = defaultdict(list)
    for r in rows:
        groups["all"].append(r)
        groups[r["kind"]].append(r)
        groups[r["template"]].append(r)
    summary = {}
    for key, rs in groups.items():
        summary[key] = {"steps": len(rs), "student_greedy": round(statistics.fmean(r["student"] for r in rs), 3),
                        "teacher_greedy": round(statistics.fmean(r["teacher"] for r in rs), 3),
                        "ref_logp_gain": round(statistics.fmean(r["lp_teacher"] - r["lp_student"] for r in rs), 3)}
        s = summary[key]
        print(f"{key:>8}: {s['steps']} steps; greedy step correct: student {s['student_greedy']}, hinted teacher "
              f"{s['teacher_greedy']}; reference log p per token, teacher - student: {s['ref_logp_gain']:+.3f}")
    wrong = [r for r in rows if r["student"] and not r["teacher"]][:5]
    for r in wrong:
        print(f"  hint made it wrong ({r['template']}): {r['teacher_reply']!r}")
    print(f"({time.monotonic() - t0:.0f} s, start {path})")
    a = summary["all"]
    print(json.dumps({"metric": "hinted_teacher_minus_student_greedy_step_accuracy",
                      "value": round(a["teacher_greedy"] - a["student_greedy"], 3), **a,
                      "by": {k: v for k, v in summary.items() if k != "all"}}))


if __name__ == "__main__":
    main()
