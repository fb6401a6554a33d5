"""Feedback applied to a batch of steps: the judge's votes (PRM) and, for steps whose next state yields a
hint, the teacher's logprobs of the original response under the hinted prompt (OPD)."""
from __future__ import annotations

import time

from trainers.feedback.model_judge import teacher_messages
from trainers.signals import SignalConfig


def judge_and_teach(steps, judge, hinter, signal: SignalConfig, teacher, teacher_suffix: str,
                     tools_of, salt: int) -> dict:
    """Fill in votes (PRM) and teacher logprobs (OPD) on the steps; return counts for the log.
    `judge.votes(steps)` and `hinter(judged_steps)` come from the model judge or the oracles; the teacher
    reads each hint appended to the last user message as `teacher_suffix` (`{hint}`) says."""
    info = {"judge_votes": 0, "hints_accepted": 0, "steps": len(steps), "judge_s": 0.0, "hints_s": 0.0,
            "teacher_s": 0.0}
    if not steps:
        return info
    plain = [st.step for st in steps]
    t0 = time.monotonic()
    if signal.needs_judge:
        asked = 0
        for st, j in zip(steps, judge.votes(plain, salt=salt)):
            st.judgement = j
            info["judge_votes"] += sum(v is not None for v in j.votes)
            asked += len(j.votes)
        if info["judge_votes"] < asked / 2:
            print(f"[judge] warning: {info['judge_votes']} of {asked} judge votes parsed; a step with none "
                  "scores 0 and is left out of the update. A model judge's reply is cut short when the "
                  "server's queue outlasts backend.request_deadline_s (a loaded CPU), or its answers "
                  "do not end in \\boxed{}.", flush=True)
    t1 = time.monotonic()
    info["judge_s"] = round(t1 - t0, 2)
    if signal.needs_hints:
        hints = hinter(steps)
        t2 = time.monotonic()
        info["hints_s"] = round(t2 - t1, 2)
        pairs, hinted = [], []
        for st, hint in zip(steps, hints):
            if hint:
                msgs = teacher_messages(st.step, hint, teacher_suffix)
                pairs.append((teacher.prompt_ids(msgs, tools_of(st.group)), st.response_ids))
                hinted.append((st, hint))
        scored = teacher.score_many(pairs, top_k=signal.opd_topk) if pairs else []
        for (st, hint), (lps, top) in zip(hinted, scored):
            st.teacher_logprobs, st.teacher_top = lps, top
            st.step.info["hint"] = hint
        info["hints_accepted"] = len(hinted)
        info["teacher_s"] = round(time.monotonic() - t2, 2)
    return info
