"""`mode=sft_judge`: a PRM judge and hint extractor trained for a persona's chat steps (a general agent's
env: trainers/sft_step_judge.py).

The 135M model as its own judge gives a parsable vote 7% of the time, at chance accuracy. The judge's
job on chat steps is narrow: read the reply and the user's next message, and say whether the user
accepted it. So it is taught that job on the persona's **train** split only: for every train request,
the reference reply (the user thanks it) and the initial policy's greedy reply (the user nearly always
complains) are played through the env, and the env's verdict (`step_label.satisfied`) labels the
judge prompt the model judge would send (conf/judge/, same system message and template) with a
one-line answer ending in `\\boxed{1}` or `\\boxed{-1}`. Behaviour cloning as `mode=sft` does it.
`mode.sampled_replies` adds replies sampled at temperature 1 per request, so the judge also sees the
complaints a training run's rollouts get (a greedy reply misses the same wish nearly every time).

`+feedback=model` asks the same model for OPD's hints, and the untrained 135M model gave none that
parsed in 256 steps. So the same run teaches it the hint prompt (conf/hints/) too: on a complaint,
`\\boxed{1}` and the wish the complaint names as the hint (the env's `named_wish`: the unmet want's
instruction, which is what a perfect reader of that one complaint could take from it; `hints=wish`
gives every unmet want's, more than the complaint says); on thanks, `\\boxed{-1}`.

Validity and accuracy (and the hints' `given` / `exact` / `silent` shares) are measured on the **test**
split's steps before and after, with the judge's own sampling (m votes at its temperature), and
written to `<run_dir>/metrics.json`. The trained judge is `<run_dir>/judge`; `+feedback=model
judge.model=<run_dir>/judge` uses it for votes and hints in training runs.

    python -m harness.run mode=sft_judge env=chat env.persona=brief mode.eval_limit=10
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from agents.factory import model_path, serve_policy
from nextstate.atomic import write_json_atomic
from nextstate.config import check_ranges
from nextstate.types import Sample, Step
from trainers.cpu_time import cpu_seconds
from trainers.feedback.judge_accuracy import hint_scores, judged_steps, vote_scores
from trainers.feedback.model_judge import HintConfig, JudgeConfig, ModelJudge
from trainers.job import Job
from trainers.sft import SFTConfig, end_of_turn_ids, fine_tune, prompt_sample
from trainers.sft_step_judge import sft_step_judge_main

ANSWERS = {True: "The user accepted the reply and moved on. \\boxed{1}",
           False: "The user objected to the reply and asked for something different. \\boxed{-1}"}
NO_HINT = "The user accepted the reply: nothing to change. \\boxed{-1}"


def hint_answer(wish: str) -> str:
    return f"The user asked for a change. \\boxed{{1}}\n[HINT_START]{wish}[HINT_END]"


@dataclass
class SFTJudgeConfig(SFTConfig):
    sampled_replies: int = 0  # replies sampled at temperature 1 per request, beside the greedy one
    train_limit: int | None = None  # a general agent's env: train tasks whose steps it learns from (None: all)


def judge_samples(steps: list[Step], tokenizer, judge: JudgeConfig) -> list[Sample]:
    """One sample per step: the judge prompt as the model judge renders it, and the verdict's answer
    followed by the end-of-turn token (so the judge learns to stop after its vote)."""
    end_ids = end_of_turn_ids(tokenizer)
    return [prompt_sample(tokenizer, judge.system, judge.template, step,
                          ANSWERS[bool(step.info["step_label"]["satisfied"])], end_ids, f"step{i}")
            for i, step in enumerate(steps)]


def hint_samples(steps: list[Step], tokenizer, hints: HintConfig) -> list[Sample]:
    """One sample per step with something to say: the hint prompt as the model hinter renders it, and
    the named wish as the hint (a complaint) or no hint (thanks). A complaint without an instruction
    (a want the persona file states no wish for) teaches nothing and is left out."""
    end_ids = end_of_turn_ids(tokenizer)
    out = []
    for i, step in enumerate(steps):
        wish = (step.next_state.fields.get("named_wish") or "").strip()
        satisfied = bool(step.info["step_label"]["satisfied"])
        if satisfied or wish:
            out.append(prompt_sample(tokenizer, hints.system, hints.template, step,
                               NO_HINT if satisfied else hint_answer(wish), end_ids, f"hint{i}"))
    return out


def judged(judge: ModelJudge, steps: list[Step], chunk: int = 8) -> dict:
    """The judge's vote scores and hints on `steps`, asked `chunk` steps (m each) per request: one
    request for all of them outlives the client's read timeout on 2 busy cores."""
    parts = [steps[i:i + chunk] for i in range(0, len(steps), chunk)]
    judgements = [j for k, part in enumerate(parts) for j in judge.votes(part, salt=k * chunk)]
    hints = [h for k, part in enumerate(parts) for h in judge.hints(part, salt=k * chunk)]
    return {**vote_scores(steps, judgements), "hints": hint_scores(steps, hints)}


def sft_judge_main(job: Job, run_dir: Path) -> dict:
    from transformers import AutoTokenizer

    from envs.chat.env import ChatEnv

    sc: SFTJudgeConfig = job.mode
    check_ranges("mode", sc, at_least={"epochs": 1, "batch_size": 1, "eval_limit": 1, "threads": 1,
                                       "sampled_replies": 0, "train_limit": 1},
                 above={"lr": 0, "grad_clip": 0})
    if job.env.name != "chat":  # a general agent's env: the judge learns its verifiable step labels
        return sft_step_judge_main(job, run_dir)
    if not getattr(job.env, "persona", None):
        raise SystemExit("mode=sft_judge trains a judge for a persona's chat steps: give env=chat env.persona=casual "
                         "(see envs/tasks/personas/), or a general agent's env (terminal, toolcall, gui)")
    if not (isinstance(job.judge, JudgeConfig) and isinstance(job.hints, HintConfig)):
        raise SystemExit(f"mode=sft_judge trains the model judge's prompts: judge=model hints=model, not "
                         f"judge={job.judge.name} hints={job.hints.name}")
    t0, cpu0 = time.monotonic(), cpu_seconds()
    model_cfg, judge_cfg, hints_cfg, env_cfg = job.model, job.judge, job.hints, job.env
    train_env, test_env = ChatEnv(env_cfg, split="train"), ChatEnv(env_cfg, split="test")
    test_tasks = test_env.tasks[: sc.eval_limit or None]
    init = model_path(model_cfg, job.paths.cache_dir)  # replies to judge and the judge's start: the policy's
    with serve_policy(model_cfg, job.backend, job.paths.cache_dir, path=init,
                      log_path=run_dir / "server.log") as policy:
        n = sc.sampled_replies
        train_steps = judged_steps(train_env, policy, train_env.tasks, env_cfg.system_prompt, n, job.seed)
        test_steps = judged_steps(test_env, policy, test_tasks, env_cfg.system_prompt, n, job.seed + 1)
        judge = ModelJudge(policy, judge_cfg, hints_cfg, seed=job.seed)
        before = judged(judge, test_steps)
        print(f"[sft_judge] before: {before}")
        tokenizer = AutoTokenizer.from_pretrained(init)
        samples = judge_samples(train_steps, tokenizer, judge_cfg) + hint_samples(train_steps, tokenizer, hints_cfg)
        out_dir = run_dir / "judge"
        nll_before, nll_after, losses = fine_tune(init, tokenizer, samples, sc, job.seed, out_dir, "sft_judge",
                                                  job.progress)
        policy.update_weights_from_disk(str(out_dir))
        after = judged(judge, test_steps)
    metrics = {"mode": "sft_judge", "persona": env_cfg.persona, "seed": job.seed, "model": model_cfg.name,
               "judge_from": str(init), "train_steps": len(train_steps),
               "train_satisfied": sum(s.info["step_label"]["satisfied"] for s in train_steps),
               "train_samples": len(samples), "test_steps": len(test_steps),
               "train_nll_before": nll_before, "train_nll_after": nll_after, "epoch_losses": losses,
               "test_before": before, "test_after": after,
               "judge_dir": str(out_dir), "wall_s": round(time.monotonic() - t0, 1),
               "cpu_s": round(cpu_seconds() - cpu0, 1)}
    write_json_atomic(run_dir / "metrics.json", metrics)
    print(f"[sft_judge] {len(train_steps)} train steps, {len(samples)} samples; "
          f"test votes valid {before['valid']} -> {after['valid']}, "
          f"accuracy {before['accuracy']} -> {after['accuracy']}, scored {before['scored']} -> {after['scored']}, "
          f"hints {before['hints']} -> {after['hints']}; "
          f"use it with judge.model={out_dir}")
    return metrics
