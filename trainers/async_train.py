"""`mode=async`: the paper's asynchronous training. Rollouts, judging and PPO updates run at once on
Ray (trainers/ray_loops.py; the roles in trainers/async_roles.py), so the policy never idles while
the judge scores or the trainer updates.

  eval before (here, the driver) -> RayLoops until `iterations` updates:
    rollout workers (`rollout_workers` actors, each with its env pool): a seeded group (one train
             task x group_size episodes) at a time
    judges (`judge_workers` actors): votes / hints / teacher logprobs -> the signal's samples,
             tagged with their version
    trainer (an actor): `batch_samples` fresh samples (<= `max_staleness` versions old) -> PPO
             update (rollouts go on) -> weights to every server (new episodes wait for the swap)
    -> log line + checkpoint
  -> eval after -> leaderboard row (mode=async).

Ray is local by default (started here, no set-up); `ray.address=auto` joins a cluster. On this
2-core CPU the loops compete for the same cores (benchmarks/async_vs_sync.py); the overlap pays where
serving and training have their own devices, as in the paper.

Unlike `mode=train`, a run is not reproducible step for step: which samples meet in a batch depends
on timing. A killed run resumes from its last update; groups in flight when it died are lost (new
ones are drawn, with the same seeded schedule continuing from where it stopped).
"""
from __future__ import annotations

import functools
import os
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from nextstate.atomic import append_jsonl
from trainers.async_roles import Rollout, RunSpec
from trainers.checkpoint import checkpoint_state
from trainers.infra_guard import InfraStreak
from trainers.job import Job
from trainers.ray_loops import RayLoops, Roles, UpdateReport
from trainers.ray_runtime import ray_session
from trainers.roles import Judge, Trainer
from trainers.run_state import RunState
from trainers.setup import Run, TrainConfig, add_counts, start_run
from trainers.sync import evaluate_after, finish_training


@dataclass
class AsyncTrainConfig(TrainConfig):
    batch_samples: int  # samples per update (the paper's 16)
    max_staleness: int  # a sample may be this many versions behind the trainer (the paper: one)
    judge_workers: int  # judge actors (the judge server batches their calls)
    rollout_workers: int | None  # rollout actors, each with its own envs (None: the run's `parallel`)


def record_update(state: RunState, r: UpdateReport, loops: RayLoops) -> dict:
    """Count an update into the run's state; its log line's common fields."""
    state.iteration = r.version - 1
    state.train_samples += r.samples
    state.dropped_stale += r.dropped_stale
    state.groups_started = loops.groups_started
    return {"iteration": r.version - 1, "version": r.version, "samples": r.samples,
            "staleness_mean": sum(r.staleness) / len(r.staleness), "staleness_max": max(r.staleness),
            "dropped_stale": r.dropped_stale, "trainer_wait_s": r.wait_s, "update_s": r.update_s,
            "publish_s": r.publish_s, **({"actor_restarts": r.restarts} if r.restarts else {}), **r.stats}


def ray_loops(run: Run, *, workers: int, next_group: int, with_env: bool = True,
              rollout=Rollout, judge=Judge, rollout_options: dict | None = None,
              check_group=None) -> RayLoops:
    """The loops of a run on Ray, their roles built from the run's job and servers."""
    spec = RunSpec(run.job, str(run.run_dir), run.policy.endpoints(), run.frozen.endpoints() if run.frozen else None,
                   run.judge_server.endpoints() if run.judge_server else None, with_env, os.getpid())
    tc = run.job.mode
    return RayLoops(Roles(functools.partial(rollout, spec), functools.partial(judge.from_spec, spec),
                          functools.partial(Trainer.from_spec, spec)),
                    workers=workers, batch_size=tc.batch_samples, max_staleness=tc.max_staleness,
                    version=run.state.iteration + 1, next_group=next_group, judges=tc.judge_workers,
                    placement=run.job.ray.placement(run.env_cfg.name if run.env_cfg else None),
                    rollout_options=rollout_options, check_group=check_group)


def reap_actor_containers(run_id: str, wait_s: float = 15.0) -> None:
    """Remove this run's containers left by rollout actors that are gone (labelled with their pid):
    a worker killed before it closed its envs (an OOM kill, a stop that outlasted its close) leaves
    them behind. Only this machine's Docker: on a cluster, the next run on a node reaps its orphans."""
    from envs.sandbox import docker_client, reap_orphans
    from envs.sandbox.labels import PID_LABEL, RUN_LABEL, owner_alive

    try:
        client = docker_client()
    except Exception:  # noqa: BLE001  (Docker-free envs run without a daemon)
        return
    deadline = time.monotonic() + wait_s
    while True:  # a killed worker's process may take a moment to go
        reap_orphans(client)
        left = [c for c in client.containers.list(all=True, filters={"label": f"{RUN_LABEL}={run_id}"})
                if owner_alive(c.labels) and c.labels.get(PID_LABEL) != str(os.getpid())]
        if not left or time.monotonic() > deadline:
            return
        time.sleep(0.5)


def async_main(job: Job, run_dir: Path) -> dict:
    with ExitStack() as stack:
        run = start_run(job, run_dir, stack)
        tc, state = job.mode, run.begin(checkpoint_state(run.state_file))
        stack.callback(reap_actor_containers, run_dir.name)  # after Ray has stopped (the stack unwinds in reverse)
        stack.enter_context(ray_session(job.ray))
        workers = tc.rollout_workers or job.parallel
        # two rounds of every worker's group with nothing run: the daemon (browser, server) is down
        loops = ray_loops(run, workers=workers, next_group=state.groups_started,
                          check_group=InfraStreak(2 * workers).see)
        since = {"episodes": 0, "successes": 0, "judge_votes": 0, "hints_accepted": 0, "steps": 0}

        def on_judged(group, counts: dict) -> None:  # every judged episode counts, as in mode=train
            add_counts(state, counts, 0)
            for k in since:
                since[k] += counts[k]

        def on_update(r: UpdateReport) -> None:
            log = {**record_update(state, r, loops), "elapsed_s": round(time.monotonic() - loop_start, 2),
                   "episodes": since["episodes"], "rollout_success": since["successes"] / max(1, since["episodes"]),
                   **{k: since[k] for k in ("judge_votes", "hints_accepted", "steps")}}
            since.update(dict.fromkeys(since, 0))
            it = state.iteration
            if tc.eval_every and (it + 1) % tc.eval_every == 0 and it + 1 < tc.iterations:
                mid = run.evaluate(f"eval @{it + 1}", run_dir / f"eval_it{it + 1}.jsonl")
                state.curve.append([state.train_episodes, mid["success_rate"]])
                log["eval_success"] = mid["success_rate"]
            append_jsonl(run.log_file, log)
            loops.save(state.to_dict())
            print(f"[async] update {it + 1}/{tc.iterations}: {r.samples} samples "
                  f"(staleness <= {max(r.staleness)}, {r.dropped_stale} stale dropped), "
                  f"loss {r.stats.get('loss', 0):.4f}, waited {r.wait_s:.1f} s for samples", flush=True)

        remaining = tc.iterations - (state.iteration + 1)
        loop_start = time.monotonic()
        if remaining > 0:
            loops.run(remaining, on_update, on_judged)
        after = evaluate_after(run)
    return finish_training(run, after, {"mode": "async", "batch_samples": tc.batch_samples,
                                       "max_staleness": tc.max_staleness, "dropped_stale": state.dropped_stale})
