"""Does a terminal step judge read the command, or only the exit code?

A count task ("Write the number of words in indigo.txt to umber.txt.") is solved by one command whose
output goes to a file: `wc -w < indigo.txt > umber.txt`. Its next state is `[exit code 0]` and nothing
else, and so is the next state of `find indigo.txt > umber.txt`, `echo 'indigo.txt' > umber.txt` or
`true`, none of which solves it. A judge that reads (task, action, next state) can tell them apart only
by reading the command against the task. For every held-out count-lines and count-words instance of
the templated terminal suite, this asks the judge about the reference command and those three silent
wrong ones, each with the next state the env returns for it (exit 0, no output), and prints the share
of +1 votes per kind of command. A judge whose +1 share is the same for all four rewards any command
that exits 0, and a policy trained on it drifts to such commands.

    python benchmarks/judge_blind_spot.py                         # the trained terminal judge
    python benchmarks/judge_blind_spot.py --judge <dir> --m 8

The judge defaults to mode=sft_judge's terminal checkpoint (conf/experiment/sft_judge_general_terminal.yaml,
under the results dir); `--judge start` asks the untrained start. The last line is the JSON summary.
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

from agents.factory import model_path, serve_policy
from envs.terminal.env import first_observation
from envs.terminal.templated import generate
from harness.job import compose_job
from nextstate.types import NextState, Step
from trainers.feedback.model_judge import ModelJudge

COUNT_TEMPLATES = ("count-lines", "count-words")


def silent_commands(task) -> dict[str, str]:
    """The reference command and three wrong ones with the same next state (exit 0, no output)."""
    right = task.data["reference"][0]
    src = right.split("<")[1].split(">")[0].strip()
    out = right.split(">")[-1].strip()
    return {"reference": right, "find": f"find {src} > {out}", "echo": f"echo '{src}' > {out}", "true": "true"}


def steps_for(tasks, system_prompt: str, user: str, workdir: str) -> list[tuple[str, Step]]:
    quiet = NextState("terminal", "", exit_code=0, cwd=workdir)
    found = []
    for task in tasks:
        asked = [{"role": "system", "content": system_prompt},
                 {"role": "user", "content": first_observation(task, user, workdir)}]
        for kind, command in silent_commands(task).items():
            found.append((kind, Step(0, asked, f"```bash\n{command}\n```", quiet)))
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--judge", default=None, help="a judge checkpoint dir, or `start` (default: the trained one)")
    ap.add_argument("--m", type=int, default=8, help="votes per step")
    ap.add_argument("--limit", type=int, default=20, help="held-out count instances at most")
    args = ap.parse_args()
    # no request deadline: all m x steps questions are queued at once, and the last would be cut short
    job = compose_job(["+experiment=general_terminal", "judge=model_task", "backend.request_deadline_s=null"])
    judge_dir = (Path(job.paths.results_dir) / "general/terminal/sft_judge/judge" if args.judge is None
                 else Path(model_path(job.model, job.paths.cache_dir)) if args.judge == "start" else Path(args.judge))
    if not judge_dir.exists():
        raise SystemExit(f"error: no judge at {judge_dir}: train one with "
                         "`python -m harness.run +experiment=sft_judge_general_terminal`, or pass --judge")
    env = job.env
    tasks = [t for t in generate(env.templated_train, env.templated_test, env.templated_seed, split="test")
             if t.data["template"] in COUNT_TEMPLATES][: args.limit]
    steps = steps_for(tasks, env.system_prompt, env.user, "/app")
    judge_cfg = replace(job.judge, m=args.m)
    with serve_policy(job.model, job.backend, job.paths.cache_dir, path=judge_dir) as policy:
        judgements = ModelJudge(policy, judge_cfg, None, seed=job.seed).votes([s for _, s in steps])
    plus: dict[str, list[int]] = defaultdict(list)
    for (kind, _), j in zip(steps, judgements):
        plus[kind] += [v == 1 for v in j.votes]
    if judgements and not any(v is not None for j in judgements for v in j.votes):
        print("first answers:", [j.raw[:1] for j in judgements[:2]])
    share = {kind: round(sum(v) / len(v), 3) for kind, v in plus.items()}
    valid = round(sum(v is not None for j in judgements for v in j.votes) / max(1, len(judgements) * args.m), 3)
    for kind, s in share.items():
        print(f"{kind:>10}: +1 on {s:.2f} of {len(plus[kind])} votes")
    print(json.dumps({"judge": str(judge_dir), "instances": len(tasks), "m": args.m, "valid_votes": valid,
                      "plus_share": share,
                      "reference_minus_wrong": round(share["reference"] - max(share[k] for k in share
                                                                              if k != "reference"), 3)}))


if __name__ == "__main__":
    main()
