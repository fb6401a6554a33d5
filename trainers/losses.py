"""The losses of OpenClaw-RL (arXiv 2603.10165), as pure functions on tensors: the PPO clipped
surrogate every token advantage feeds (`ppo_clipped_loss`, advantages from trainers/advantages.py),
the top-K OPD variant's loss of its own (`topk_reverse_kl`), and the optional reference penalty
(`k3_kl`). Shapes and masks: see trainers/masked.py.
"""
from __future__ import annotations

import torch
from torch import Tensor

from trainers.masked import check_shape, masked_sample_mean

# ---------------------------------------------------------------------------------------------------
# directive signal, top-K variant

def topk_reverse_kl(
    student_logprobs: Tensor,
    teacher_topk_logprobs: Tensor,
    teacher_topk_ids: Tensor,
    mask: Tensor,
    tail_min: float = 1e-8,
) -> Tensor:
    """Per-token reverse KL(student || teacher) over the teacher's top-K ids plus one tail bin.

    The optional top-K OPD variant: instead of scoring only the sampled token, compare the two
    distributions where the teacher puts its mass. Both are reduced to K + 1 bins, the K ids the
    teacher ranked highest and a tail holding the rest (1 − sum of the K probabilities), so the
    result is a true KL between two distributions and needs only K teacher log-probs per token
    (the paper uses K = 50; K is whatever size the tensors have). Reverse KL (expectation under the
    student) is mode-seeking: the student is penalised for mass the teacher does not support.
    Tails are clamped to at least `tail_min`, since rounding can make 1 − sum slightly negative
    (and when K covers the vocabulary the tail bin then contributes ~0).

    student_logprobs: [B, T, V] full-vocab log-probs; raw logits also work, since log_softmax is
    applied and leaves log-probs unchanged. teacher_topk_logprobs: [B, T, K] (full-vocab
    log-probs of the teacher at those ids); teacher_topk_ids: [B, T, K] long; mask: [B, T].
    Returns [B, T], differentiable w.r.t. the student, zero on padding (aggregate it with
    `masked_sample_mean`).
    """
    check_shape("teacher_topk_ids", teacher_topk_ids, teacher_topk_logprobs.shape)
    check_shape("mask", mask, teacher_topk_logprobs.shape[:2])
    m = mask.bool()
    student = torch.log_softmax(student_logprobs, dim=-1)
    # Padding may hold junk ids (e.g. -1); point them at id 0 so gather is safe.
    ids = torch.where(m[..., None], teacher_topk_ids.long(), torch.zeros_like(teacher_topk_ids).long())
    s_top = student.gather(-1, ids)
    t_top = torch.where(m[..., None], teacher_topk_logprobs, torch.zeros_like(teacher_topk_logprobs))

    s_tail = (1.0 - s_top.exp().sum(-1)).clamp(min=tail_min)
    t_tail = (1.0 - t_top.exp().sum(-1)).clamp(min=tail_min)
    kl = (s_top.exp() * (s_top - t_top)).sum(-1) + s_tail * (s_tail.log() - t_tail.log())
    return torch.where(m, kl, torch.zeros_like(kl))


# ---------------------------------------------------------------------------------------------------
# policy loss


def ppo_clipped_loss(logprobs: Tensor, old_logprobs: Tensor, advantages: Tensor, mask: Tensor, *,
                     eps_low: float = 0.2, eps_high: float = 0.28) -> tuple[Tensor, dict[str, Tensor]]:
    """PPO clipped surrogate with asymmetric bounds [1 − eps_low, 1 + eps_high].

    ρ = exp(log π_θ − log π_old); per token max(−ρA, −clip(ρ)·A), i.e. the pessimistic bound, so a
    step cannot profit from moving ρ beyond the band. The upper bound is looser than the lower
    (0.28 vs 0.2, "clip-higher") so that unlikely tokens with positive advantage can still grow.
    Aggregated with `masked_sample_mean` (token-mean within sample, mean over samples).

    All inputs [B, T]. Returns (loss, stats); stats are detached 0-dim tensors (no .item(), so no
    CPU-GPU sync here), averaged over all response tokens of the batch:
      clip_fraction  share of tokens where the clipped term won (its gradient is zero there);
      approx_kl      k3 estimate of KL(π_old || π_θ), mean of (ρ − 1) − log ρ (CleanRL's name);
      old_approx_kl  mean of log π_old − log π_θ (the naive k1 estimate, CleanRL's name).
    """
    check_shape("logprobs", logprobs, mask.shape)
    check_shape("old_logprobs", old_logprobs, mask.shape)
    check_shape("advantages", advantages, mask.shape)
    m = mask.bool()
    logratio = torch.where(m, logprobs - old_logprobs, torch.zeros_like(logprobs))
    ratio = logratio.exp()
    adv = torch.where(m, advantages.detach(), torch.zeros_like(logratio))
    pg_loss1 = -adv * ratio
    pg_loss2 = -adv * torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high)
    loss = masked_sample_mean(torch.max(pg_loss1, pg_loss2), m)

    with torch.no_grad():
        n = m.sum().clamp(min=1)
        stats = {
            "clip_fraction": ((pg_loss2 > pg_loss1) & m).sum() / n,
            "approx_kl": torch.where(m, (ratio - 1) - logratio, 0.0).sum() / n,
            "old_approx_kl": torch.where(m, -logratio, 0.0).sum() / n,
        }
    return loss, stats


def k3_kl(logprobs: Tensor, ref_logprobs: Tensor, mask: Tensor) -> Tensor:
    """k3 estimate of KL(π_θ || π_ref) from sampled tokens: exp(ref − logp) − (ref − logp) − 1.

    Unbiased and always >= 0 per token (unlike the plain log-ratio), so it is a low-variance
    penalty that keeps the policy near the reference. Aggregated like the policy loss
    (`masked_sample_mean`); the caller adds kl_coef · k3_kl (0 for personal agents, 0.01–0.02
    elsewhere). All inputs [B, T].
    """
    check_shape("logprobs", logprobs, mask.shape)
    check_shape("ref_logprobs", ref_logprobs, mask.shape)
    m = mask.bool()
    d = torch.where(m, ref_logprobs.detach() - logprobs, torch.zeros_like(logprobs))
    return masked_sample_mean(d.exp() - d - 1.0, m)
