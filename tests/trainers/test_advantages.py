"""trainers.advantages against hand-computed numbers (arithmetic in the comments) and a few properties."""
from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from trainers.advantages import (
    broadcast_step_advantage,
    combined_advantage,
    grpo_outcome_advantages,
    majority_vote,
    mean_valid_vote,
    opd_token_advantage,
    stepwise_standardize,
)

T = torch.tensor
LN = math.log


# --- grpo_outcome_advantages ---------------------------------------------------------------------


def test_grpo_one_group_hand_numbers():
    # [1,0,0,1]: mean .5, population sigma .5 -> (r-.5)/.5 = [1,-1,-1,1]
    adv = grpo_outcome_advantages(T([1.0, 0.0, 0.0, 1.0]), T([0, 0, 0, 0]))
    assert_close(adv, T([1.0, -1.0, -1.0, 1.0]))


def test_grpo_population_std_and_interleaved_groups():
    # group 7: [1,2,3] mean 2, var (1+0+1)/3 = 2/3, sigma .8165 -> [-1.2247, 0, 1.2247]
    #   (unbiased std would be 1 -> [-1, 0, 1]; this test tells them apart)
    # group 3: [5, 5] all equal -> 0; group 9: single entry -> 0
    rewards = T([1.0, 5.0, 2.0, 5.0, 3.0, 4.0])
    groups = T([7, 3, 7, 3, 7, 9])
    s = 1 / math.sqrt(2 / 3)
    assert_close(grpo_outcome_advantages(rewards, groups), T([-s, 0.0, 0.0, 0.0, s, 0.0]))


def test_grpo_equal_non_representable_rewards_give_exact_zero():
    # mean of three 0.1s is not exactly 0.1 in float32; (r - mean)/eps must not leak through.
    adv = grpo_outcome_advantages(T([0.1, 0.1, 0.1]), T([0, 0, 0]))
    assert torch.equal(adv, torch.zeros(3))


# --- stepwise_standardize ------------------------------------------------------------------------


def test_stepwise_standardize_hand_numbers():
    # bucket (g0, s0): [1, 3] mean 2, sigma 1 -> [-1, 1]
    # bucket (g0, s1): [2, 2] all equal -> dropped (keep False)
    # bucket (g0, s2): [5] single -> kept raw 5
    # bucket (g1, s0): [0, 0, 3] mean 1, var (1+1+4)/3 = 2, sigma sqrt2 -> [-1/sqrt2, -1/sqrt2, sqrt2]
    #   (same step index as (g0, s0), but another task: must not be pooled with it)
    values = T([1.0, 0.0, 2.0, 5.0, 3.0, 0.0, 2.0, 3.0])
    groups = T([0, 1, 0, 0, 0, 1, 0, 1])
    steps = T([0, 0, 1, 2, 0, 0, 1, 0])
    adv, keep = stepwise_standardize(values, groups, steps)
    r = 1 / math.sqrt(2)
    assert_close(adv[keep], T([-1.0, -r, 5.0, 1.0, -r, math.sqrt(2)]))
    assert keep.tolist() == [True, True, False, True, True, True, False, True]


def test_stepwise_standardize_matches_python_loop_reference():
    g = torch.Generator().manual_seed(0)
    n = 60
    groups = torch.randint(0, 4, (n,), generator=g)
    steps = torch.randint(0, 5, (n,), generator=g)
    values = torch.randint(-1, 2, (n,), generator=g).double()  # small set -> some constant buckets
    adv, keep = stepwise_standardize(values, groups, steps)

    for i in range(n):
        peers = [values[j].item() for j in range(n) if (groups[j], steps[j]) == (groups[i], steps[i])]
        mu = sum(peers) / len(peers)
        sd = math.sqrt(sum((p - mu) ** 2 for p in peers) / len(peers))
        if len(peers) == 1:
            assert keep[i] and adv[i].item() == values[i].item()
        elif len(set(peers)) == 1:
            assert not keep[i]
        else:
            assert keep[i]
            assert adv[i].item() == pytest.approx((values[i].item() - mu) / (sd + 1e-6))


# --- votes ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "votes, expected",
    [
        ([1, 1, -1], 1),
        ([-1, -1, 1], -1),
        ([1, -1], 0),  # tie
        ([1, -1, None], 0),  # tie; None counts for nothing
        ([1, -1, 0], 0),  # three-way tie
        ([0, 0, 1], 0),  # 0 wins outright
        ([-1, None, None], -1),  # one valid vote beats two unparsable ones
        ([None, None, None], 0),
        ([], 0),
    ],
)
def test_majority_vote(votes, expected):
    assert majority_vote(votes) == expected


@pytest.mark.parametrize(
    "votes, expected",
    [
        ([1, -1, 1], 1 / 3),  # (1 - 1 + 1)/3
        ([1, 0, None, -1, -1], -1 / 3),  # 0 and None excluded: (1 - 1 - 1)/3
        ([1, 1, None], 1.0),
        ([0, None], 0.0),
        ([], 0.0),
    ],
)
def test_mean_valid_vote(votes, expected):
    assert mean_valid_vote(votes) == pytest.approx(expected)


def test_votes_reject_out_of_range_values():
    with pytest.raises(ValueError):
        majority_vote([1, 2])
    with pytest.raises(ValueError):
        mean_valid_vote([1, 2])


# --- token advantages ----------------------------------------------------------------------------


def test_broadcast_step_advantage():
    mask = T([[1, 1, 0], [1, 0, 0]])
    assert_close(broadcast_step_advantage(T([2.0, -1.0]), mask), T([[2.0, 2.0, 0.0], [-1.0, 0.0, 0.0]]))


def test_opd_token_advantage_and_padding():
    # -0.5 - (-1.0) = 0.5; -1.0 - (-0.5) = -0.5; padding holds -inf/nan and must come out 0
    teacher = T([[-0.5, -1.0, -float("inf")], [-2.0, float("nan"), 0.0]])
    old = T([[-1.0, -0.5, -3.0], [-0.5, -1.0, 0.0]])
    mask = T([[1, 1, 0], [1, 0, 0]])
    assert_close(opd_token_advantage(teacher, old, mask), T([[0.5, -0.5, 0.0], [-1.5, 0.0, 0.0]]))


def test_combined_advantage_with_and_without_hint():
    old = torch.zeros(3, 2)
    teacher = T([[0.5, -0.25], [0.2, -0.1], [9.0, 9.0]])  # log pT - log pold per token
    mask = torch.ones(3, 2)
    r = T([1.0, 0.0, -1.0])
    hint = T([True, True, False])
    # sample 0: combined, 1 + [.5, -.25] = [1.5, .75]
    # sample 1: r = 0 with hint -> OPD-only [.2, -.1]
    # sample 2: no hint -> RL-only [-1, -1] (teacher's 9s ignored)
    adv = combined_advantage(r, teacher, old, mask, has_hint=hint)
    assert_close(adv, T([[1.5, 0.75], [0.2, -0.1], [-1.0, -1.0]]))
    # weights: w_rl=2, w_opd=.5 -> sample 0: [2 + .25, 2 - .125] = [2.25, 1.875]
    adv = combined_advantage(r, teacher, old, mask, w_rl=2.0, w_opd=0.5, has_hint=hint)
    assert_close(adv[0], T([2.25, 1.875]))
    # has_hint=None: every sample gets its OPD term -> sample 2: -1 + 9 = 8
    assert_close(combined_advantage(r, teacher, old, mask)[2], T([8.0, 8.0]))


def test_combined_advantage_masks_padding():
    adv = combined_advantage(T([1.0]), T([[0.5, 7.0]]), T([[0.0, 0.0]]), T([[1, 0]]))
    assert_close(adv, T([[1.5, 0.0]]))
