"""Per-token advantages of one step from its step-score advantage and its hint (shared by the judged
signals): A = w_rl * a + w_opd * (log p_T - log p_old), or, with `opd_topk`, the score's advantage plus
the teacher's top K carried on the sample for the update's reverse-KL term."""
from __future__ import annotations

import torch

from nextstate.types import Sample
from trainers.advantages import combined_advantage
from trainers.signals.config import SignalConfig
from trainers.signals.steps import JudgedStep, to_sample


def step_sample(cfg: SignalConfig, st: JudgedStep, score_adv: float | None, hinted: bool) -> Sample | None:
    """The sample of one step, or None when it carries nothing to learn: no kept score (`score_adv`
    None or 0) and no hint."""
    has_score = score_adv is not None and score_adv != 0.0
    has_hint = hinted and st.teacher_logprobs is not None
    if not (has_hint or has_score):
        return None
    old = torch.tensor([st.old_logprobs])
    topk = has_hint and cfg.opd_topk > 0  # the OPD term is then a loss of its own, not an advantage
    teacher = old
    if has_hint and not topk:  # past opd_positions the teacher is the old policy: no OPD there
        n = cfg.opd_positions or len(st.teacher_logprobs)
        teacher = torch.tensor([st.teacher_logprobs[:n] + st.old_logprobs[n:]])
    tok = combined_advantage(torch.tensor([score_adv if has_score else 0.0]), teacher, old,
                             torch.ones_like(old, dtype=torch.bool), w_rl=cfg.w_rl, w_opd=cfg.w_opd,
                             has_hint=torch.tensor([has_hint and not topk]))
    sample = to_sample(st, tok[0].tolist())
    if topk:
        sample.teacher_top = st.teacher_top[:cfg.opd_positions] if cfg.opd_positions else st.teacher_top
        sample.opd_weight = cfg.w_opd
    return sample
