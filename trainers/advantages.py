"""Advantages of OpenClaw-RL (arXiv 2603.10165), as pure functions on tensors.

Evaluative signal (binary RL): judge votes -> `majority_vote` / `mean_valid_vote` -> a step reward ->
advantage (`grpo_outcome_advantages`, `stepwise_standardize`, or the reward itself for personal
agents) -> `broadcast_step_advantage` over the response tokens.
Directive signal (OPD): teacher log-probs of the sampled tokens under the hinted context ->
`opd_token_advantage`; both signals together -> `combined_advantage`. Every token advantage feeds
the same `trainers.losses.ppo_clipped_loss`. Advantages are returned detached: they are constants of
the surrogate. Shapes and masks: see trainers/masked.py.
"""
from __future__ import annotations

import torch
from torch import Tensor

from trainers.masked import as_float, check_shape


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
    rewards = as_float(rewards).detach()
    check_shape("group_ids", group_ids, rewards.shape)
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
    values = as_float(values).detach()
    check_shape("group_ids", group_ids, values.shape)
    check_shape("step_index", step_index, values.shape)
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
    step_adv = as_float(step_adv).detach()
    check_shape("step_adv", step_adv, mask.shape[:1])
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
    check_shape("teacher_logprobs", teacher_logprobs, mask.shape)
    check_shape("old_logprobs", old_logprobs, mask.shape)
    diff = (teacher_logprobs - old_logprobs).detach()
    return torch.where(mask.bool(), diff, torch.zeros_like(diff))


def combined_advantage(
    step_reward: Tensor,
    teacher_logprobs: Tensor,
    old_logprobs: Tensor,
    mask: Tensor,
    *,
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
        check_shape("has_hint", has_hint, mask.shape[:1])
        opd = torch.where(has_hint.bool()[:, None], opd, torch.zeros_like(opd))
    return w_rl * rl + w_opd * opd
