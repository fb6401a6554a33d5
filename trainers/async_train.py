"""`mode=async`: the paper's asynchronous training. Rollouts, judging and PPO updates run at once
(trainers/async_loops.py), so the policy never idles while the judge scores or the trainer updates.

  eval before -> AsyncLoops until `iterations` updates:
    rollout workers (`parallel`): a seeded group (one train task x group_size episodes) at a time
    judge threads (`judge_workers`): votes / hints / teacher logprobs -> the signal's samples, tagged
             with their version
    trainer: `batch_samples` fresh samples (<= `max_staleness` versions old) -> PPO update (rollouts
             go on) -> weights to the server (new episodes wait for the swap) -> log line + checkpoint
  -> eval after -> leaderboard row (mode=async).

On this 2-core CPU the loops compete for the same cores: benchmarks/async_vs_sync.py measured 0.78x
the trained samples per second of `mode=train`. The overlap pays where serving and training have
their own devices, as in the paper.

Unlike `mode=train`, a run is not reproducible step for step: which samples meet in a batch depends
on thread timing. A killed run resumes from its last update; groups in flight when it died are lost
(new ones are drawn, with the same seeded schedule continuing from where it stopped).
"""
from __future__ import annotations

import random
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig

from agents.rollout import run_episode
from nextstate.atomic import append_jsonl
from trainers.async_loops import AsyncLoops, Gate, UpdateReport
from trainers.curriculum import max_steps_at
from trainers.run_state import RunState
from trainers.setup import TrainConfig, Training, start_training
from trainers.sync import evaluate_after, finish_training


@dataclass
class AsyncTrainConfig(TrainConfig):
    batch_samples: int  # samples per update (the paper's 16)
    max_staleness: int  # a sample may be this many versions behind the trainer (the paper: one)
    judge_workers: int  # threads judging finished groups at once (the judge server batches their calls)


def record_update(state: RunState, r: UpdateReport, loops: AsyncLoops) -> dict:
    """Count an update into the run's state (call under the state's lock); its log line's common fields."""
    state.iteration = r.version - 1
    state.train_samples += r.samples
    state.dropped_stale += r.dropped_stale
    state.groups_started = loops.groups_started
    return {"iteration": r.version - 1, "version": r.version, "samples": r.samples,
            "staleness_mean": sum(r.staleness) / len(r.staleness), "staleness_max": max(r.staleness),
            "dropped_stale": r.dropped_stale, "trainer_wait_s": r.wait_s, "update_s": r.update_s,
            "publish_s": r.publish_s, "rollouts_held_s": round(loops.gate.waited_s, 3), **r.stats}


def group_task(tr: Training, group_no: int):
    """Group n's task: a seeded draw, so a resumed run continues the same schedule (a string seed:
    `hash()` of a str differs between processes)."""
    rng = random.Random(f"group {tr.cfg.seed} {group_no}")
    return tr.train_tasks[rng.randrange(len(tr.train_tasks))]


def async_main(cfg: DictConfig, run_dir: Path) -> dict:
    with ExitStack() as stack:
        tr = start_training(cfg, run_dir, stack, AsyncTrainConfig)
        tc, state = tr.tc, tr.state
        tr.policy.sampling = tr.roll_sampling
        tr.pool.set_max_steps(max_steps_at(state.iteration + 1, tc.iterations, tc.max_steps_start,
                                           tr.env_cfg.max_steps))
        lock = threading.Lock()  # the judge thread counts into `state`; the trainer logs and saves it
        since = {"episodes": 0, "successes": 0, "judge_votes": 0, "hints_accepted": 0, "steps": 0}

        def produce(group_no: int, gate: Gate):
            task, trajs, version = group_task(tr, group_no), [], None
            for k in range(tc.group_size):
                v = gate.wait_open()
                version = v if version is None else version  # versions only grow: the first is the oldest
                trajs.append(run_episode(tr.pool.get(), tr.rollout_agent(hash((cfg.seed, group_no, k))), task,
                                         tr.env_cfg.system_prompt, seed=cfg.seed))
            return version, trajs

        def judge(group_no: int, trajs):
            samples, steps, info = tr.samples(trajs, salt=group_no)
            with lock:  # every judged episode counts, as in mode=train, trained on or not
                tr.count(trajs, 0, steps, info)
                since["episodes"] += len(trajs)
                since["successes"] += sum(t.success for t in trajs)
                for k in ("judge_votes", "hints_accepted", "steps"):
                    since[k] += info[k]
            return samples

        def update(samples):
            return tr.update(samples, seed=hash((cfg.seed, state.iteration + 1)))

        def on_update(r: UpdateReport) -> None:
            with lock:
                log = {**record_update(state, r, loops), "elapsed_s": round(time.monotonic() - loop_start, 2),
                       "episodes": since["episodes"], "rollout_success": since["successes"] / max(1, since["episodes"]),
                       **{k: since[k] for k in ("judge_votes", "hints_accepted", "steps")}}
                since.update(dict.fromkeys(since, 0))
            it = state.iteration
            tr.pool.set_max_steps(max_steps_at(it + 1, tc.iterations, tc.max_steps_start, tr.env_cfg.max_steps))
            if tc.eval_every and (it + 1) % tc.eval_every == 0 and it + 1 < tc.iterations:
                mid = tr.evaluate(f"eval @{it + 1}", run_dir / f"eval_it{it + 1}.jsonl")
                tr.policy.sampling = tr.roll_sampling
                state.curve.append([state.train_episodes, mid["success_rate"]])
                log["eval_success"] = mid["success_rate"]
            append_jsonl(tr.log_file, log)
            with lock:
                tr.checkpoint()
            print(f"[async] update {it + 1}/{tc.iterations}: {r.samples} samples "
                  f"(staleness <= {max(r.staleness)}, {r.dropped_stale} stale dropped), "
                  f"loss {r.stats.get('loss', 0):.4f}, waited {r.wait_s:.1f} s for samples")

        loops = AsyncLoops(produce=produce, judge=judge, update=update, publish=tr.publish,
                           workers=max(1, cfg.parallel), batch_size=tc.batch_samples, max_staleness=tc.max_staleness,
                           version=state.iteration + 1, next_group=state.groups_started,
                           judges=tc.judge_workers)
        remaining = tc.iterations - (state.iteration + 1)
        loop_start = time.monotonic()
        if remaining > 0:
            loops.run(remaining, on_update)
        tr.pool.set_max_steps(tr.env_cfg.max_steps)
        after = evaluate_after(tr)
    return finish_training(tr, after, {"mode": "async", "batch_samples": tc.batch_samples,
                                       "max_staleness": tc.max_staleness, "dropped_stale": state.dropped_stale})
