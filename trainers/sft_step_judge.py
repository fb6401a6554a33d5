"""`mode=sft_judge` on a general agent's env (terminal, tool-call, GUI): a PRM judge taught the env's
verifiable step labels, on the TRAIN split only.

The 135M start as its own judge votes from the action and what came back (`judge=model`); whether a
command moved a task on depends on the task, so the judge taught here reads it too
(`judge=model_task`). The steps it learns from are the ones a training run asks about: the start
policy's rollouts at temperature 1 (`mode.sampled_replies` per task; `model.init_from` is the grid's
SFT start) and the oracle's (steps that are right). Each is labelled as the oracle judge votes (+1 when
every verifiable label of the step holds, -1 when one fails; steps without labels are left out) and
becomes the judge prompt the model judge sends, answered by one line ending in that vote. Behaviour
cloning as mode=sft does it. Validity and accuracy on the test split's steps (collected the same way)
before and after go to metrics.json; `judge=model_task judge.model=<run_dir>/judge` trains with it."""
from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path

from agents.base import ModelAgent, OracleAgent
from agents.factory import model_path, serve_policy
from agents.pool import run_episodes
from agents.serving.transformers_policy import SamplingConfig
from envs.make import env_maker
from nextstate.atomic import write_json_atomic
from nextstate.types import Sample, Step, Trajectory
from trainers.cpu_time import cpu_seconds
from trainers.feedback.judge_accuracy import vote_scores
from trainers.feedback.model_judge import JudgeConfig, ModelJudge
from trainers.feedback.oracle_judge import oracle_vote
from trainers.job import Job
from trainers.sft import end_of_turn_ids, fine_tune, prompt_sample
from trainers.sft_run import pool_and_splits

STEP_ANSWERS = {1: "The action worked and moved the task on. \\boxed{1}",
                -1: "The action failed or did not move the task on. \\boxed{-1}"}


def labelled_steps(trajs: list[Trajectory]) -> list[Step]:
    """The steps of episodes that ran (an infra failure says nothing of the action) whose labels give
    a vote."""
    return [s for t in trajs if not t.infra_failure for s in t.steps if oracle_vote(s) != 0]


def step_judge_samples(steps: list[Step], tokenizer, judge: JudgeConfig) -> list[Sample]:
    """One sample per labelled step: the judge prompt as the model judge renders it, and the answer
    of the step's label, ending the turn."""
    end_ids = end_of_turn_ids(tokenizer)
    return [prompt_sample(tokenizer, judge.system, judge.template, s, STEP_ANSWERS[oracle_vote(s)], end_ids, f"step{i}")
            for i, s in enumerate(steps)]


def _steps(pool, policy, tasks, job: Job, system_prompt: str, sampled: int, salt: int, split: str) -> list[Step]:
    """The oracle's episode and `sampled` of the policy's at temperature 1 per task, as steps."""
    hot = SamplingConfig(job.model.max_new_tokens, 1.0, 1.0, job.model.max_prompt_tokens)
    oracle = run_episodes(pool, lambda i: OracleAgent(), tasks, system_prompt=system_prompt, seed=job.seed,
                          parallel=job.parallel, progress=job.progress, desc=f"{split}: oracle")
    drawn = run_episodes(pool, lambda i: ModelAgent(policy, hot, seed=hash((job.seed, salt, i)) % 2**31),
                         [t for t in tasks for _ in range(sampled)], system_prompt=system_prompt, seed=job.seed,
                         parallel=job.parallel, progress=job.progress, desc=f"{split}: rollouts")
    return labelled_steps(oracle) + labelled_steps(drawn)


def judged(judge: ModelJudge, steps: list[Step], chunk: int = 16) -> dict:
    parts = [steps[i:i + chunk] for i in range(0, len(steps), chunk)]
    return vote_scores(steps, [j for k, part in enumerate(parts) for j in judge.votes(part, salt=k * chunk)])


def sft_step_judge_main(job: Job, run_dir: Path) -> dict:
    from transformers import AutoTokenizer

    if not isinstance(job.judge, JudgeConfig):
        raise SystemExit(f"mode=sft_judge trains a model judge's prompt: judge=model_task (or model), "
                         f"not judge={job.judge.name}")
    t0, cpu0 = time.monotonic(), cpu_seconds()
    sc = job.mode
    make_env, env_cfg = env_maker(job.env, job.sandbox, run_dir, split=None)
    init = Path(job.model.init_from or model_path(job.model, job.paths.cache_dir))
    with ExitStack() as stack:
        pool, _, train_tasks, test_tasks = pool_and_splits(stack, make_env, job.exclude_tags, sc.train_limit,
                                                           sc.eval_limit)
        policy = stack.enter_context(serve_policy(job.model, job.backend, job.paths.cache_dir, path=init,
                                                  log_path=run_dir / "server.log"))
        n = sc.sampled_replies
        train_steps = _steps(pool, policy, train_tasks, job, env_cfg.system_prompt, n, 0, "train")
        test_steps = _steps(pool, policy, test_tasks, job, env_cfg.system_prompt, n, 1, "test")
        judge = ModelJudge(policy, job.judge, None, seed=job.seed)
        before = judged(judge, test_steps)
        print(f"[sft_judge] before: {before}")
        tokenizer = AutoTokenizer.from_pretrained(init)
        samples = step_judge_samples(train_steps, tokenizer, job.judge)
        out_dir = run_dir / "judge"
        nll_before, nll_after, losses = fine_tune(init, tokenizer, samples, sc, job.seed, out_dir, "sft_judge",
                                                  job.progress)
        policy.update_weights_from_disk(str(out_dir))
        after = judged(judge, test_steps)
    metrics = {"mode": "sft_judge", "env": env_cfg.name, "suite": getattr(env_cfg, "suite", None), "seed": job.seed,
               "model": job.model.name, "judge_from": str(init), "judge": job.judge.name,
               "train_tasks": len(train_tasks), "train_steps": len(train_steps),
               "train_right": sum(oracle_vote(s) > 0 for s in train_steps), "train_samples": len(samples),
               "test_tasks": len(test_tasks), "test_steps": len(test_steps),
               "train_nll_before": nll_before, "train_nll_after": nll_after, "epoch_losses": losses,
               "test_before": before, "test_after": after, "judge_dir": str(out_dir),
               "wall_s": round(time.monotonic() - t0, 1), "cpu_s": round(cpu_seconds() - cpu0, 1)}
    write_json_atomic(run_dir / "metrics.json", metrics)
    print(f"[sft_judge] {len(train_steps)} train steps ({metrics['train_right']} right); test votes valid "
          f"{before['valid']} -> {after['valid']}, accuracy {before['accuracy']} -> {after['accuracy']}, "
          f"scored {before['scored']} -> {after['scored']}; use it with judge={job.judge.name} judge.model={out_dir}")
    return metrics
