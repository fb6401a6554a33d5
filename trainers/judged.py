"""From rolled-out trajectories to trainable samples: the run's feedback (judge, hints, teacher, KL
reference) is applied to every step, then the signal builds its samples. Each mode calls it where its
judging happens: in the loop (mode=train), in a judge actor (mode=async) or beside the proxy."""
from __future__ import annotations

from dataclasses import dataclass

from agents.serving.chat import stop_token_ids
from agents.serving.http_policy import HTTPPolicy
from trainers.feedback.apply import judge_and_teach
from trainers.feedback.model_judge import HintConfig, JudgeConfig, ModelJudge
from trainers.feedback.registry import HINTERS, JUDGES, FeedbackSources, Hinter, StepJudge, choose
from trainers.job import Job
from trainers.signals import SignalConfig, build_samples, collect_steps
from trainers.update import shared_rows

# what the feedback of a batch adds to its log line, in this order
FEEDBACK_LOG_KEYS = ("judge_votes", "hints_accepted", "steps", "judge_s", "hints_s", "teacher_s")


@dataclass
class StepFeedback:
    """What turns judged steps into samples (the judge, the hints, the teacher, the KL reference)."""
    signal: SignalConfig
    judge: StepJudge | None
    hinter: Hinter
    teacher: HTTPPolicy | None
    teacher_suffix: str  # how the teacher reads a hint (hints.teacher_suffix)
    tools: dict[str, list[dict]]
    kl_coef: float
    frozen: HTTPPolicy | None
    untrained_ids: frozenset[int] = frozenset()  # a reply's last token, when one of these, is left out


def judged_samples(trajs, salt: int, fb: StepFeedback) -> tuple[list, list, dict]:
    """Judge and teach the trajectories' steps, then build the signal's samples (with KL reference
    logprobs when asked): (samples, judged steps, counts for the log)."""
    steps = collect_steps(trajs, fb.untrained_ids)
    info = judge_and_teach(steps, fb.judge, fb.hinter, fb.signal, fb.teacher, fb.teacher_suffix, fb.tools.get,
                           salt=salt)
    samples = build_samples(fb.signal, steps, trajs)
    if fb.kl_coef > 0 and samples:
        for s, lps in zip(samples, reference_logprobs(fb.frozen, samples)):
            s.ref_logprobs = lps
    return samples, steps, info


def reference_logprobs(scorer, samples: list) -> list[list[float]]:
    """The KL reference's logprobs of each sample's reply, one scoring per episode: a step whose prompt
    and reply start a later step's prompt (`shared_rows`) is read from that step's row, so a k-step
    episode is scored once from its first reply on, not k times from the start (measured: the reference
    scoring was a third of a terminal update)."""
    seqs = [s.prompt_ids + s.response_ids for s in samples]
    host = shared_rows(seqs)
    rows = sorted(set(host))
    start = {r: min(len(samples[i].prompt_ids) for i in range(len(samples)) if host[i] == r) for r in rows}
    scored = scorer.score_many([(seqs[r][:start[r]], seqs[r][start[r]:]) for r in rows])
    by_row = {r: lps for r, (lps, _) in zip(rows, scored)}
    out = []
    for s, h in zip(samples, host):
        at = len(s.prompt_ids) - start[h]
        out.append(by_row[h][at: at + len(s.response_ids)])
    return out


def judged_counts(trajs, steps, info: dict) -> dict:
    """What a judged group adds to the run's totals and its log line (small and plain: it travels
    between processes)."""
    return {"episodes": len(trajs), "successes": sum(t.success for t in trajs),
            "tokens": sum(t.n_tokens for t in trajs),
            **{k: info[k] for k in FEEDBACK_LOG_KEYS},
            "step_scores": [s.judgement.score for s in steps if s.judgement],
            "judge_pairs": [[s.judgement.score, s.step.info.get("step_label")] for s in steps
                            if s.judgement and s.step.info.get("step_label")]}


def step_feedback(job: Job, env, frozen: HTTPPolicy | None, policy: HTTPPolicy, tools: dict, *,
                teacher: str, kl_coef: float, judge_server: HTTPPolicy | None = None,
                train_stop_token: bool = True) -> StepFeedback:
    """The run's judge, hints and teacher (`mode.teacher`: the frozen initial weights or the current
    policy); the oracles read the env's reference solutions. The model judge and hinter ask
    `judge_server` (a trained `judge.model`) when there is one, else the frozen initial weights.
    `train_stop_token=False` leaves each reply's stop token out of its sample (`mode.train_stop_token`)."""
    signal, judge_cfg, hints_cfg = job.signal, job.judge, job.hints
    by_id = {t.task_id: t for t in env.tasks} if env is not None else {}
    asked = judge_server or frozen
    model_judge = ModelJudge(asked, judge_cfg if isinstance(judge_cfg, JudgeConfig) else None,
                             hints_cfg if isinstance(hints_cfg, HintConfig) else None, seed=job.seed) if asked else None
    sources = FeedbackSources(model_judge,
                              lambda task_id: env.reference_actions(by_id[task_id]), judge_cfg, hints_cfg)
    return StepFeedback(signal, choose(JUDGES, "judge", judge_cfg.name).build(sources),
                        choose(HINTERS, "hints", hints_cfg.name).build(sources),
                        frozen if teacher == "frozen" else policy, hints_cfg.teacher_suffix, tools, kl_coef, frozen,
                        frozenset() if train_stop_token else stop_token_ids(policy.tokenizer))
