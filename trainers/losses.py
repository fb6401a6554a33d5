"""Advantages and losses of OpenClaw-RL (arXiv 2603.10165), as pure functions on tensors.

Evaluative signal (binary RL): judge votes -> `majority_vote` / `mean_valid_vote` -> a step reward ->
advantage (`grpo_outcome_advantages`, `stepwise_standardize`, or the reward itself for personal
agents) -> `broadcast_step_advantage` over the response tokens.
Directive signal (OPD): teacher log-probs of the sampled tokens under the hinted context ->
`opd_token_advantage`; both signals together -> `combined_advantage`; the optional top-K variant is a
loss of its own (`topk_reverse_kl`).
Every token advantage feeds the same `ppo_clipped_loss`; `k3_kl` is the optional reference penalty.

Conventions: B samples, T response tokens (right-padded), V vocabulary. A mask is bool or 0/1 and
marks real response tokens; padding never contributes to any value or gradient, even when it holds
inf/nan. Advantages are returned detached: they are constants of the surrogate.
"""
from __future__ import annotations

import torch
from torch import Tensor

__all__ = [
    "masked_sample_mean",
    "grpo_outcome_advantages",
    "stepwise_standardize",
    "majority_vote",
    "mean_valid_vote",
    "broadcast_step_advantage",
    "opd_token_advantage",
    "topk_reverse_kl",
    "combined_advantage",
    "ppo_clipped_loss",
    "k3_kl",
]


# ---------------------------------------------------------------------------------------------------
# helpers


def _check_shape(name: str, x: Tensor, shape: torch.Size) -> None:
    # Broadcasting would silently turn a [B] into a [B,B]; shapes are checked instead.
    if x.shape != shape:
        raise ValueError(f"{name} has shape {tuple(x.shape)}, expected {tuple(shape)}")


def _float(x: Tensor) -> Tensor:
    return x if x.is_floating_point() else x.to(torch.get_default_dtype())


def masked_sample_mean(x: Tensor, mask: Tensor) -> Tensor:
    """Token-mean within each sample (over its mask), then mean over the samples that have tokens.

    This is the paper's aggregation: every sample weighs the same whatever its length, so one long
    response cannot drown many short ones. A sample with an empty mask has no mean and is left out;
    if every sample is empty the result is a 0 that still carries a (zero) gradient, so a training
    step never has to special-case an empty batch.
    """
    _check_shape("mask", mask, x.shape)
    m = mask.bool()
    x = torch.where(m, x, torch.zeros_like(x))  # where, not x*mask: padding may hold inf/nan
    n_tok = m.sum(dim=-1)
    nonempty = n_tok > 0
    if not bool(nonempty.any()):  # CPU-GPU sync; one per loss call
        return x.sum() * 0.0
    per_sample = x.sum(dim=-1) / n_tok.clamp(min=1).to(x.dtype)
    return per_sample[nonempty].mean()


def _bucket_stats(values: Tensor, keys: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Per-entry (count, mean, population std, all-equal) of the bucket each entry falls in.

    `keys` is [N] or [N, k]; entries with equal key rows share a bucket.
    """
    _, inv = torch.unique(keys, dim=0, return_inverse=True)
    n_buckets = int(inv.max()) + 1 if inv.numel() else 0
    zeros = values.new_zeros(n_buckets)
    count = zeros.scatter_add(0, inv, torch.ones_like(values))
    mean = zeros.scatter_add(0, inv, values) / count
    var = zeros.scatter_add(0, inv, (values - mean[inv]) ** 2) / count  # population variance
    vmax = zeros.scatter_reduce(0, inv, values, reduce="amax", include_self=False)
    vmin = zeros.scatter_reduce(0, inv, values, reduce="amin", include_self=False)
    # "All equal" is tested with max == min, not std == 0: the mean of three 0.1s is not exactly
    # 0.1 in floating point, and (r - mean) / eps would turn that rounding into a large advantage.
    all_equal = vmax == vmin
    return count[inv], mean[inv], var.sqrt()[inv], all_equal[inv]


# ---------------------------------------------------------------------------------------------------
# evaluative signal: rewards -> advantages


def grpo_outcome_advantages(rewards: Tensor, group_ids: Tensor, eps: float = 1e-6) -> Tensor:
    """GRPO outcome advantage: (r - mean_group) / (std_group + eps), population std.

    The n rollouts of one task form a group, and each is scored against its siblings, so no value
    network is needed. A group of one entry, or whose rewards are all equal, gets advantage 0:
    there is nothing to compare with, and the group teaches nothing (rather than eps-amplified
    noise). The caller broadcasts the result to every step of the trajectory.

    rewards: [N] float, one outcome per trajectory; group_ids: [N] int.
    """
    rewards = _float(rewards).detach()
    _check_shape("group_ids", group_ids, rewards.shape)
    if rewards.numel() == 0:
        return rewards.clone()
    count, mean, std, all_equal = _bucket_stats(rewards, group_ids)
    adv = (rewards - mean) / (std + eps)
    return torch.where((count < 2) | all_equal, torch.zeros_like(adv), adv)


def stepwise_standardize(
    values: Tensor, group_ids: Tensor, step_index: Tensor, eps: float = 1e-6
) -> tuple[Tensor, Tensor]:
    """Step-wise standardization for general agents: z-score within (task group, step index).

    Step t of one rollout is compared with step t of the other rollouts of the same task, since
    rewards at different depths of an episode are not on the same scale. Rules (population std):
      * a bucket of >= 2 entries whose values are all equal is dropped (keep False, advantage 0):
        it carries no preference between actions;
      * a bucket of one entry is kept raw (value unchanged, keep True): the step has no peer, but
        its reward (outcome + step score) still says something;
      * otherwise (v - mean) / (std + eps), keep True.

    values: [N] step rewards; group_ids, step_index: [N] int. Returns (advantages [N], keep [N] bool).
    """
    values = _float(values).detach()
    _check_shape("group_ids", group_ids, values.shape)
    _check_shape("step_index", step_index, values.shape)
    if values.numel() == 0:
        return values.clone(), torch.zeros_like(values, dtype=torch.bool)
    keys = torch.stack([group_ids.long(), step_index.long()], dim=-1)
    count, mean, std, all_equal = _bucket_stats(values, keys)
    single = count < 2
    dropped = ~single & all_equal
    z = (values - mean) / (std + eps)
    adv = torch.where(single, values, torch.where(dropped, torch.zeros_like(z), z))
    return adv, ~dropped


def majority_vote(votes: list[int | None]) -> int:
    """Personal-agent step score: the judge's most common verdict among {+1, -1, 0}.

    None is an unparsable answer and counts for nothing. The winner needs strictly the most votes;
    a tie for the top, or no valid vote at all, gives 0, and a 0-scored turn is masked out of the
    RL loss by the caller (the judge was not sure, so the turn is not trained on).
    """
    counts = {1: 0, -1: 0, 0: 0}
    for v in votes:
        if v is None:
            continue
        if v not in counts:
            raise ValueError(f"vote must be +1, -1, 0 or None, got {v!r}")
        counts[v] += 1
    top = max(counts.values())
    winners = [v for v, c in counts.items() if c == top]
    return winners[0] if top > 0 and len(winners) == 1 else 0


def mean_valid_vote(votes: list[int | None]) -> float:
    """General-agent step score: mean of the valid ±1 votes (0 and None excluded), 0.0 if none.

    Unlike `majority_vote` it keeps the judge's uncertainty (2 of 3 votes → 1/3) as a graded score
    that is added to the outcome: R_t = outcome + step score.
    """
    valid = []
    for v in votes:
        if v is None or v == 0:
            continue
        if v not in (1, -1):
            raise ValueError(f"vote must be +1, -1, 0 or None, got {v!r}")
        valid.append(v)
    return sum(valid) / len(valid) if valid else 0.0


def broadcast_step_advantage(step_adv: Tensor, mask: Tensor) -> Tensor:
    """PRM advantage of each sample copied onto its response tokens (zero on padding).

    The judge scores the whole action a_t, so every token of that action gets the same credit.
    step_adv: [B]; mask: [B, T]. Returns [B, T].
    """
    step_adv = _float(step_adv).detach()
    _check_shape("step_adv", step_adv, mask.shape[:1])
    full = step_adv[:, None].expand(mask.shape)
    return torch.where(mask.bool(), full, torch.zeros_like(full))


# ---------------------------------------------------------------------------------------------------
# directive signal: hindsight-guided on-policy distillation


def opd_token_advantage(teacher_logprobs: Tensor, old_logprobs: Tensor, mask: Tensor) -> Tensor:
    """OPD token advantage A_t = log π_teacher(a_t | s + hint) − log π_old(a_t | s) (top-1).

    Only the sampled token is scored: a token the hinted teacher finds likelier than the policy did
    is pushed up, one it finds less likely is pushed down. Detached: in self-distillation the
    teacher is the policy itself, and its log-probs must not be differentiated through.
    All [B, T]; zero where mask is 0.
    """
    _check_shape("teacher_logprobs", teacher_logprobs, mask.shape)
    _check_shape("old_logprobs", old_logprobs, mask.shape)
    diff = (teacher_logprobs - old_logprobs).detach()
    return torch.where(mask.bool(), diff, torch.zeros_like(diff))


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
    _check_shape("teacher_topk_ids", teacher_topk_ids, teacher_topk_logprobs.shape)
    _check_shape("mask", mask, teacher_topk_logprobs.shape[:2])
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


def combined_advantage(
    step_reward: Tensor,
    teacher_logprobs: Tensor,
    old_logprobs: Tensor,
    mask: Tensor,
    w_rl: float = 1.0,
    w_opd: float = 1.0,
    has_hint: Tensor | None = None,
) -> Tensor:
    """Combined token advantage A = w_rl·r + w_opd·(log π_T − log π_old).

    The evaluative score says how good the action was, the hint says how it should have differed;
    the two add up per token. A sample without a hint has no teacher, so its OPD term is 0
    (RL-only); a sample with a hint and r = 0 is OPD-only. has_hint=None means every sample has one.
    step_reward: [B]; teacher_logprobs, old_logprobs, mask: [B, T]; has_hint: [B] bool. Returns [B, T].
    """
    rl = broadcast_step_advantage(step_reward, mask)
    opd = opd_token_advantage(teacher_logprobs, old_logprobs, mask)
    if has_hint is not None:
        _check_shape("has_hint", has_hint, mask.shape[:1])
        opd = torch.where(has_hint.bool()[:, None], opd, torch.zeros_like(opd))
    return w_rl * rl + w_opd * opd


# ---------------------------------------------------------------------------------------------------
# policy loss


def ppo_clipped_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
) -> tuple[Tensor, dict[str, Tensor]]:
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
    _check_shape("logprobs", logprobs, mask.shape)
    _check_shape("old_logprobs", old_logprobs, mask.shape)
    _check_shape("advantages", advantages, mask.shape)
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
    _check_shape("logprobs", logprobs, mask.shape)
    _check_shape("ref_logprobs", ref_logprobs, mask.shape)
    m = mask.bool()
    d = torch.where(m, ref_logprobs.detach() - logprobs, torch.zeros_like(logprobs))
    return masked_sample_mean(d.exp() - d - 1.0, m)
