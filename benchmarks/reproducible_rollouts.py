"""What bit-reproducible rollouts cost: one update's sampled episodes on the experiment's backend and on
`backend=embedded_reproducible` (every reply computed alone, uncached, never preempted), each twice.

On the default backend a multi-step episode's reply shares a batch with whatever else reached the
server then, and its logits differ in the last bits with that company; at temperature 1 a sample can
flip and the episode goes elsewhere. The reproducible backend removes that, at the price of batching.
For each backend it prints the seconds of each pass and whether the two passes took the same actions
in every episode; the last line is the JSON summary (the seconds ratio, reproducible / default).

    python benchmarks/reproducible_rollouts.py                                 # general_toolcall, 32 episodes
    python benchmarks/reproducible_rollouts.py --experiment general_terminal --episodes 16
"""
from __future__ import annotations

import argparse
import json
import random
import time
from contextlib import ExitStack
from pathlib import Path

from general_ceiling import start_model  # the script beside this one

from agents.base import ModelAgent
from agents.factory import serve_policy
from agents.pool import EnvPool, run_episodes
from agents.serving.transformers_policy import SamplingConfig
from envs.make import env_maker


def passes(job, path: Path, tasks_of, episodes: int, run_dir: Path) -> tuple[list[float], bool]:
    """Two passes of `episodes` seeded episodes on the job's backend: (seconds of each, same actions?)."""
    mc = job.model
    hot = SamplingConfig(mc.max_new_tokens, job.mode.rollout_temperature, 1.0, mc.max_prompt_tokens)
    seconds, actions = [], []
    run_dir.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        make_env, env_cfg = env_maker(job.env, job.sandbox, run_dir, split="train")
        pool = EnvPool(make_env)
        stack.callback(pool.close)
        tasks = tasks_of(pool.get().unwrapped.tasks)[:episodes]
        policy = stack.enter_context(serve_policy(mc, job.backend, job.paths.cache_dir, path=path,
                                                  log_path=run_dir / "server.log"))
        for _ in range(2):
            t0 = time.monotonic()
            trajs = run_episodes(pool, lambda i: ModelAgent(policy, hot, seed=1000 + i), tasks,
                                 system_prompt=env_cfg.system_prompt, seed=job.seed, parallel=job.parallel,
                                 progress=False)
            seconds.append(round(time.monotonic() - t0, 1))
            actions.append([[s.action_text for s in t.steps] for t in trajs])
            (run_dir / f"pass{len(actions)}.json").write_text(json.dumps(actions[-1], indent=1))
    for i, (a, b) in enumerate(zip(*actions)):
        if a != b:
            k = next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            print(f"  episode {i} ({tasks[i].task_id}) first differs at step {k}: "
                  f"{(a[k:k + 1] or ['(ended)'])[0]!r} / {(b[k:k + 1] or ['(ended)'])[0]!r}", flush=True)
            break
    return seconds, actions[0] == actions[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--experiment", default="general_toolcall")
    ap.add_argument("--episodes", type=int, default=32, help="sampled episodes a pass (an update's: 8 x 4)")
    ap.add_argument("overrides", nargs="*", help="more config overrides, e.g. model.init_from=...")
    args = ap.parse_args()
    if args.episodes < 1:
        raise SystemExit("error: --episodes must be at least 1")
    run_dir = Path("/tmp/reproducible_rollouts")
    run_dir.mkdir(parents=True, exist_ok=True)
    result = {}
    for name, extra in (("default", []), ("reproducible", ["backend=embedded_reproducible"])):
        # no wall clock on an episode: a queue of replies served one by one would cut episodes by load
        job, _, path = start_model(args.experiment, ["env.max_seconds=null", *args.overrides, *extra])

        group = job.mode.group_size

        def groups(tasks, group=group):  # an update's shape: instances drawn with a fixed seed, group times each
            drawn = random.Random(0).sample(tasks, min(len(tasks), -(-args.episodes // group)))
            return [t for t in drawn for _ in range(group)]

        seconds, same = passes(job, path, groups, args.episodes, run_dir / name)
        result[name] = {"seconds": seconds, "same_actions": same}
        print(f"{name:>12}: {seconds[0]} s, {seconds[1]} s; the two passes took the same actions: {same}", flush=True)
    ratio = min(result["reproducible"]["seconds"]) / max(1e-9, min(result["default"]["seconds"]))
    print(json.dumps({"metric": "reproducible_rollout_seconds_ratio", "value": round(ratio, 2),
                      "target": "reproducible passes take the same actions; the ratio is its cost",
                      "higher_is_better": False, "experiment": args.experiment, "episodes": args.episodes,
                      **result}))


if __name__ == "__main__":
    main()
