"""Where a general-agent grid starts: the start's greedy held-out success and its pass@k.

RL can only make likelier what the policy already samples, so a start with room to learn sits
between 0.05 and 0.7 greedy and samples the right episode more often than its greedy one does
(pass@k clearly above greedy). For each held-out instance we run one greedy episode and k episodes
at the rollout temperature, through the env itself (real tools, real grading), from the model the
experiment trains (its `model.init_from`, e.g. the SFT warm start).

    python benchmarks/general_ceiling.py                                  # general_toolcall, k=8
    python benchmarks/general_ceiling.py --experiment general_terminal --k 8 --limit 50

The last line is the JSON summary; per template (the task's second tag) the same numbers are printed.
Instances run in chunks with a running tally after each; stopped (Ctrl-C, SIGTERM, a `timeout`), it
closes its sandboxes and prints the summary of the instances it finished, marked `"partial": true`.
"""
from __future__ import annotations

import argparse
import json
import random
import signal
import time
from collections import defaultdict
from contextlib import ExitStack
from pathlib import Path

from agents.base import ModelAgent, OracleAgent
from agents.factory import model_path, serve_policy
from agents.pool import EnvPool, run_episodes
from agents.serving.transformers_policy import SamplingConfig
from envs.make import env_maker
from harness.job import compose_job


def start_model(experiment: str, overrides: list[str]):
    """The experiment's typed job, its model config and the weights it trains from (`model.init_from`,
    e.g. the SFT warm start), which must exist."""
    job = compose_job([f"+experiment={experiment}", *overrides])
    mc = job.model
    path = Path(mc.init_from or model_path(mc, job.paths.cache_dir))
    if not path.exists():
        raise SystemExit(f"error: {path} does not exist (train the warm start first: make general runs it)")
    return job, mc, path


def oracle_train_trajectories(job, limit: int, run_dir: Path):
    """The oracle's episodes on `limit` train instances drawn with a fixed seed (every template shows up),
    and the suite's tool set: (tasks, trajectories, tools). The env is closed when they are in."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        make_env, env_cfg = env_maker(job.env, job.sandbox, run_dir, split="train")
        pool = EnvPool(make_env)
        stack.callback(pool.close)
        env = pool.get().unwrapped
        tasks = random.Random(0).sample(env.tasks, min(limit, len(env.tasks)))
        trajs = run_episodes(pool, lambda i: OracleAgent(), tasks, system_prompt=env_cfg.system_prompt,
                             seed=job.seed, parallel=1, progress=False)
        return tasks, trajs, env.tools_for(tasks[0])  # one tool set for the whole suite


def tally(tasks, greedy, sampled, k: int) -> dict:
    """Per template (the task's second tag) and over "all": n, greedy success, per-sample success, pass@k."""
    rows = defaultdict(lambda: {"n": 0, "greedy": 0, "samples": 0, "pass": 0})
    for i, task in enumerate(tasks):
        wins = [t.success for t in sampled[i * k:(i + 1) * k]]
        for key in ("all", task.tags[1] if len(task.tags) > 1 else task.difficulty):
            r = rows[key]
            r["n"] += 1
            r["greedy"] += greedy[i].success
            r["samples"] += sum(wins)
            r["pass"] += any(wins)
    return {key: {"n": r["n"], "greedy": round(r["greedy"] / r["n"], 3),
                  "sample_success": round(r["samples"] / (r["n"] * k), 3),
                  f"pass_at_{k}": round(r["pass"] / r["n"], 3)} for key, r in rows.items()}


def _stop(signum, frame):  # SIGTERM (e.g. `timeout`) -> the Ctrl-C path: sandboxes closed, partial summary
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--experiment", default="general_toolcall")
    ap.add_argument("--k", type=int, default=8, help="sampled episodes per instance")
    ap.add_argument("--limit", type=int, default=None, help="the first N test instances (default: all)")
    ap.add_argument("--chunk", type=int, default=8, help="instances per chunk (a tally is printed after each)")
    ap.add_argument("overrides", nargs="*", help="more config overrides, e.g. model.init_from=...")
    args = ap.parse_args()
    if args.k < 1 or args.chunk < 1 or (args.limit is not None and args.limit < 1):
        raise SystemExit("error: --k, --chunk and --limit must be at least 1")
    signal.signal(signal.SIGTERM, _stop)
    job, mc, path = start_model(args.experiment, args.overrides)
    t0 = time.monotonic()
    run_dir = Path("/tmp/general_ceiling")
    run_dir.mkdir(parents=True, exist_ok=True)
    done, greedy, sampled, stopped = [], [], [], False
    with ExitStack() as stack:
        make_env, env_cfg = env_maker(job.env, job.sandbox, run_dir, split="test")
        pool = EnvPool(make_env)
        stack.callback(pool.close)
        tasks = pool.get().unwrapped.tasks[: args.limit]
        policy = stack.enter_context(serve_policy(mc, job.backend, job.paths.cache_dir,
                                                  path=path, log_path=run_dir / "server.log"))
        greedy_sampling = SamplingConfig(mc.max_new_tokens, 0.0, 1.0, mc.max_prompt_tokens)
        hot = SamplingConfig(mc.max_new_tokens, job.mode.rollout_temperature, 1.0, mc.max_prompt_tokens)
        try:
            for at in range(0, len(tasks), args.chunk):
                chunk = tasks[at:at + args.chunk]
                g = run_episodes(pool, lambda i: ModelAgent(policy, greedy_sampling), chunk,
                                 system_prompt=env_cfg.system_prompt, seed=job.seed, parallel=job.parallel,
                                 desc="greedy", progress=False)
                repeated = [t for t in chunk for _ in range(args.k)]
                first = at * args.k  # episode seeds as if every instance ran in one batch

                def sampler(i, first=first):
                    return ModelAgent(policy, hot, seed=1000 + first + i)

                s = run_episodes(pool, sampler, repeated, system_prompt=env_cfg.system_prompt, seed=job.seed,
                                 parallel=job.parallel, desc=f"{args.k} samples each", progress=False)
                done, greedy, sampled = done + chunk, greedy + g, sampled + s
                r = tally(done, greedy, sampled, args.k)["all"]
                print(f"[{len(done)}/{len(tasks)} instances, {time.monotonic() - t0:.0f} s] greedy {r['greedy']}, "
                      f"per sample {r['sample_success']}, pass@{args.k} {r[f'pass_at_{args.k}']}", flush=True)
        except KeyboardInterrupt:
            stopped = True
            print(f"stopped after {len(done)} of {len(tasks)} instances; closing the sandboxes", flush=True)
    if not done:
        raise SystemExit("error: stopped before the first chunk finished: nothing to report")
    summary = tally(done, greedy, sampled, args.k)
    for key, r in summary.items():
        print(f"{key:>10}: n {r['n']}, greedy {r['greedy']}, per sample {r['sample_success']}, "
              f"pass@{args.k} {r[f'pass_at_{args.k}']}")
    print(f"({time.monotonic() - t0:.0f} s, start {path})")
    s = summary["all"]
    print(json.dumps({"metric": "general_start_pass_at_k_minus_greedy",
                      "value": round(s[f"pass_at_{args.k}"] - s["greedy"], 3), "target": "greedy in 0.05-0.7, "
                      "pass@k clearly above", "higher_is_better": True, "experiment": args.experiment,
                      "k": args.k, "temperature": job.mode.rollout_temperature, "partial": stopped, **summary}))


if __name__ == "__main__":
    main()
