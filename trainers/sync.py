"""`mode=train`: the synchronous training loop that compares the four signals on any env.

  eval before (test split, greedy) -> for each iteration:
    rollouts (train split, temperature 1, group_size per task, seeded per episode)
    -> judge votes (PRM) / hindsight hints -> teacher logprobs (OPD)
    -> samples with per-token advantages -> PPO update -> weights pushed to the serving endpoint
    -> checkpoint (a killed run resumes with resume=<run_dir> and takes the same next step)
  -> eval after -> leaderboard row (+ the sweep's success-vs-samples plot).

Servers: the policy endpoint serves rollouts (and the teacher when teacher=policy); a second,
frozen endpoint on the initial checkpoint serves the judge, the hints and the frozen teacher / KL
reference. Both speak the same protocol (embedded CPU server or SGLang).
"""
from __future__ import annotations

import datetime as dt
import random
import shutil
import time
from contextlib import ExitStack
from pathlib import Path

from agents.base import ModelAgent
from agents.pool import run_episodes
from nextstate.atomic import append_jsonl, read_jsonl
from nextstate.config import suite_of
from nextstate.leaderboard import commit_run, git_commit
from trainers.cpu_time import cpu_seconds
from trainers.curriculum import max_steps_at
from trainers.feedback.judge_accuracy import judge_accuracy
from trainers.infra_guard import require_some_ran
from trainers.job import Job
from trainers.judged import FEEDBACK_LOG_KEYS
from trainers.roles import Judge, Trainer
from trainers.setup import Run, add_counts, rollout_sampling, start_run
from trainers.train_plot import write_train_plot


def train_main(job: Job, run_dir: Path) -> dict:
    tc = job.mode
    with ExitStack() as stack:
        run = start_run(job, run_dir, stack)
        tasks, policy, sampling = run.tasks, run.policy, rollout_sampling(job.model, tc)
        judge = Judge(job, tasks.env, tasks.tools, policy, run.frozen, run.judge_server)
        trainer = Trainer(job, run_dir, policy)
        state = run.begin(trainer.saved)
        loop_start = time.monotonic()
        for it in range(state.iteration + 1, tc.iterations):
            rng = random.Random(hash((job.seed, it)))
            chosen = rng.sample(tasks.train, min(tc.tasks_per_iter, len(tasks.train)))
            batch = [t for t in chosen for _ in range(tc.group_size)]
            tasks.pool.set_max_steps(max_steps_at(it, tc.iterations, tc.max_steps_start, tasks.env_cfg.max_steps))
            t0 = time.monotonic()
            trajs = run_episodes(
                tasks.pool, lambda i, it=it: ModelAgent(policy, sampling, seed=hash((job.seed, it, i)) % 2**31),
                batch, system_prompt=tasks.env_cfg.system_prompt, seed=job.seed, parallel=job.parallel,
                progress=job.progress, desc=f"rollouts {it + 1}/{tc.iterations}")
            t1 = time.monotonic()
            require_some_ran(trajs, f"the rollouts of update {it + 1}")
            samples, counts = judge.judge(it, trajs)
            t2 = time.monotonic()
            stats = trainer.update(samples, version=it + 1)
            t3 = time.monotonic()
            trainer.publish()
            state.iteration = it
            add_counts(state, counts, len(samples))
            log = {"iteration": it, "elapsed_s": round(time.monotonic() - loop_start, 2), "episodes": len(trajs),
                   "samples": len(samples), "rollout_success": sum(t.success for t in trajs) / max(1, len(trajs)),
                   **{k: counts[k] for k in FEEDBACK_LOG_KEYS}, "rollout_s": round(t1 - t0, 2),
                   "signal_s": round(t2 - t1, 2), "update_s": round(t3 - t2, 2),
                   "publish_s": round(time.monotonic() - t3, 2), **stats}
            tasks.pool.set_max_steps(tasks.env_cfg.max_steps)  # evaluation always uses the env's own limit
            if tc.eval_every and (it + 1) % tc.eval_every == 0 and it + 1 < tc.iterations:
                t4 = time.monotonic()
                mid = run.evaluate(f"eval @{it + 1}", run_dir / f"eval_it{it + 1}.jsonl")
                state.curve.append([state.train_episodes, mid["success_rate"]])
                log.update(eval_success=mid["success_rate"], eval_s=round(time.monotonic() - t4, 2))
            append_jsonl(run.log_file, log)
            trainer.save(state.to_dict())
            print(f"[train] it {it + 1}/{tc.iterations}: {len(samples)} samples, loss {stats.get('loss', 0):.4f}, "
                  f"rollout success {log['rollout_success']:.2f}")
        after = evaluate_after(run)
    return finish_training(run, after)


def evaluate_after(run: Run) -> dict:
    after = run.evaluate("eval after", run.run_dir / "eval_after.jsonl")
    run.state.curve.append([run.state.train_episodes, after["success_rate"]])
    return after


def finish_training(run: Run, after: dict, extra: dict | None = None) -> dict:
    """metrics.json, the leaderboard row, the run's training curves and the sweep plot of a finished run."""
    job, state, run_dir, env_cfg = run.job, run.state, run.run_dir, run.env_cfg
    tc, signal, model_cfg, judge_cfg, hints_cfg = job.mode, job.signal, job.model, job.judge, job.hints
    acc = judge_accuracy(state.judge_pairs)
    scores = state.step_scores
    metrics = {
        "env": env_cfg.name, "suite": suite_of(env_cfg), "signal": signal.name,
        "model": model_cfg.name, "seed": job.seed, "teacher": tc.teacher if signal.needs_hints else "-",
        "judge": judge_cfg.name if signal.needs_judge else "-", "hints": hints_cfg.name if signal.needs_hints else "-",
        "iterations": tc.iterations, "train_episodes": state.train_episodes, "train_samples": state.train_samples,
        "success_before": state.success_before, "success_after": after["success_rate"],
        "delta": after["success_rate"] - state.success_before,
        "mean_step_score": sum(scores) / len(scores) if scores else None,
        "judge_votes": state.judge_votes, "hints_accepted": state.hints_accepted,
        "judge_neg_precision": acc["precision"], "judge_neg_recall": acc["recall"], "judge_labeled_steps": acc["n"],
        "tokens": state.tokens, "wall_s": round(time.monotonic() - run.t_start, 1),
        "cpu_s": round(cpu_seconds() - run.cpu_start, 1), "curve": state.curve,
        **(extra or {}),
        "train_log": read_jsonl(run.log_file),
    }
    row = {"timestamp": dt.datetime.now().isoformat(timespec="seconds"), "env": metrics["env"],
           "suite": metrics["suite"], "split": "test", "agent": "model", "model": metrics["model"],
           "signal": signal.name, "seed": job.seed, "n_tasks": len(run.test_tasks),
           "success_rate": round(after["success_rate"], 4), "mean_steps": round(after["mean_steps"], 2),
           "infra_failures": after["infra_failures"], "tokens": metrics["tokens"], "wall_s": metrics["wall_s"],
           "cpu_s": metrics["cpu_s"], "run_dir": str(run_dir), "git_commit": git_commit(),
           **{k: ("" if metrics[k] is None else (round(metrics[k], 4) if isinstance(metrics[k], float) else metrics[k]))
              for k in ("train_episodes", "train_samples", "success_before", "success_after", "delta",
                        "mean_step_score", "judge_votes", "hints_accepted", "judge_neg_precision",
                        "judge_neg_recall", "teacher", "judge", "hints")},
           **({"mode": tc.name} if tc.name != "train" else {})}
    # metrics.json and the row, committed so that a kill between them leaves a row resume= files once
    commit_run(run_dir, metrics, Path(job.paths.results_dir) / "leaderboard.csv", row)
    if not tc.keep_checkpoint:  # only a killed run needs it to resume; the final weights stay
        shutil.rmtree(run.state_file, ignore_errors=True)
    write_train_plot(run_dir)
    print(f"[train] {signal.name}: success {metrics['success_before']:.3f} -> {metrics['success_after']:.3f} "
          f"({metrics['train_episodes']} episodes, {metrics['train_samples']} samples, {metrics['wall_s']:.0f} s)")
    return metrics
