"""`mode=sft`: oracle trajectories of the train split -> behaviour cloning -> a model dir for
`model.init_from`, with the test success before and after in the leaderboard (signal=sft)."""
from __future__ import annotations

import datetime as dt
import time
from contextlib import ExitStack
from pathlib import Path

from agents.base import OracleAgent
from agents.factory import model_path, serve_policy
from agents.pool import EnvPool, run_episodes
from agents.serving.chat import render_prompt_ids
from agents.serving.transformers_policy import SamplingConfig
from envs.make import env_maker
from envs.sandbox import wait_for_background_removals
from nextstate.atomic import write_jsonl_atomic
from nextstate.config import check_ranges, suite_of
from nextstate.leaderboard import commit_run, git_commit
from trainers.cpu_time import cpu_seconds
from trainers.curriculum import without_tags
from trainers.infra_guard import require_some_ran
from trainers.job import Job
from trainers.setup import evaluate_policy
from trainers.sft import SFTConfig, fine_tune, sft_samples


class SplitLeakError(RuntimeError):
    pass


def oracle_trajectories(pool, tasks, system_prompt, seed, parallel, progress):
    leaked = [t.task_id for t in tasks if t.split != "train"]
    if leaked:  # behaviour cloning must never see what it is evaluated on
        raise SplitLeakError(f"SFT was given non-train tasks: {leaked}")
    trajs = run_episodes(pool, lambda i: OracleAgent(), tasks, system_prompt=system_prompt, seed=seed,
                         parallel=parallel, progress=progress, desc="oracle demos")
    require_some_ran(trajs, "the oracle demonstrations")
    return [t for t in trajs if t.success and not t.infra_failure]


def pool_and_splits(stack: ExitStack, make_env, exclude_tags, train_limit: int | None, test_limit: int | None):
    """A pool of the env (closed, its containers removed, when `stack` closes), the env, and its first
    `train_limit` train and `test_limit` test tasks (None: all), prepared."""
    pool = EnvPool(make_env)
    stack.callback(wait_for_background_removals)
    stack.callback(pool.close)
    env = pool.get().unwrapped
    suite = without_tags(env.tasks, exclude_tags)
    train_tasks = [t for t in suite if t.split == "train"][: train_limit or None]
    test_tasks = [t for t in suite if t.split == "test"][: test_limit or None]
    if hasattr(env, "prepare"):
        env.prepare(train_tasks + test_tasks)
    return pool, env, train_tasks, test_tasks


def sft_main(job: Job, run_dir: Path) -> dict:
    from transformers import AutoTokenizer


    t0, cpu0 = time.monotonic(), cpu_seconds()
    sc: SFTConfig = job.mode
    check_ranges("mode", sc, at_least={"epochs": 1, "batch_size": 1, "eval_limit": 1, "threads": 1},
                 above={"lr": 0, "grad_clip": 0})
    model_cfg = job.model
    make_env, env_cfg = env_maker(job.env, job.sandbox, run_dir, split=None)
    init_path = Path(model_cfg.init_from or model_path(model_cfg, job.paths.cache_dir))
    eval_sampling = SamplingConfig(model_cfg.max_new_tokens, 0.0, 1.0, model_cfg.max_prompt_tokens)
    with ExitStack() as stack:
        pool, env, train_tasks, test_tasks = pool_and_splits(stack, make_env, job.exclude_tags, None, sc.eval_limit)
        demos = oracle_trajectories(pool, train_tasks, env_cfg.system_prompt, job.seed, job.parallel, job.progress)
        write_jsonl_atomic(run_dir / "demos.jsonl", (t.to_dict() for t in demos))  # a rerun replaces them
        tokenizer = AutoTokenizer.from_pretrained(init_path)
        samples = sft_samples(demos, tokenizer,
                              lambda tid: env.tools_for(env._by_id[tid]) if hasattr(env, "_by_id") else None,
                              render_prompt_ids)
        policy = stack.enter_context(serve_policy(model_cfg, job.backend, job.paths.cache_dir,
                                                  path=init_path, log_path=run_dir / "server.log"))

        def evaluate(name):
            return evaluate_policy(pool, policy, eval_sampling, test_tasks, env_cfg.system_prompt, job.seed,
                                   job.parallel, job.progress, name, run_dir / f"{name.replace(' ', '_')}.jsonl")

        before = evaluate("eval before")
        out_dir = run_dir / "model"
        nll_before, nll_after, losses = fine_tune(init_path, tokenizer, samples, sc, job.seed, out_dir, "sft",
                                                  job.progress)
        policy.update_weights_from_disk(str(out_dir))
        after = evaluate("eval after")
    metrics = {"env": env_cfg.name, "suite": suite_of(env_cfg), "signal": "sft", "seed": job.seed,
               "model": model_cfg.name, "demos": len(demos), "train_samples": len(samples),
               "train_tasks": [t.task_id for t in train_tasks], "train_nll_before": nll_before,
               "train_nll_after": nll_after, "epoch_losses": losses, "success_before": before["success_rate"],
               "success_after": after["success_rate"], "delta": after["success_rate"] - before["success_rate"],
               "model_dir": str(out_dir), "wall_s": round(time.monotonic() - t0, 1),
               "cpu_s": round(cpu_seconds() - cpu0, 1)}
    # metrics.json and the row, committed so that a kill between them leaves a row resume= files once
    commit_run(run_dir, metrics, Path(job.paths.results_dir) / "leaderboard.csv", {
        "timestamp": dt.datetime.now().isoformat(timespec="seconds"), "env": metrics["env"], "suite": metrics["suite"],
        "split": "test", "agent": "model", "model": model_cfg.name, "signal": "sft", "seed": job.seed,
        "n_tasks": len(test_tasks), "success_rate": round(after["success_rate"], 4),
        "mean_steps": round(after["mean_steps"], 2), "infra_failures": after["infra_failures"],
        "tokens": sum(len(s.response_ids) for s in samples), "wall_s": metrics["wall_s"], "cpu_s": metrics["cpu_s"],
        "run_dir": str(run_dir), "git_commit": git_commit(), "train_samples": len(samples),
        "success_before": round(before["success_rate"], 4), "success_after": round(after["success_rate"], 4),
        "delta": round(metrics["delta"], 4)})
    print(f"[sft] {len(samples)} samples from {len(demos)} oracle demos; "
          f"train NLL {nll_before:.3f} -> {nll_after:.3f}; "
          f"test success {before['success_rate']:.3f} -> {after['success_rate']:.3f}; model: {out_dir}")
    return metrics
