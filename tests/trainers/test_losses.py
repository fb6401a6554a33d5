"""trainers.losses and trainers.masked against hand-computed numbers (arithmetic in the comments)
and a few properties."""
from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from trainers.losses import k3_kl, ppo_clipped_loss, topk_reverse_kl
from trainers.masked import masked_sample_mean

T = torch.tensor
LN = math.log

# --- masked_sample_mean --------------------------------------------------------------------------


def test_masked_sample_mean_is_mean_of_per_sample_token_means():
    # sample 0: (1+2)/2 = 1.5; sample 1: 4/1 = 4; sample 2: empty -> excluded. (1.5+4)/2 = 2.75.
    # (A flat token mean would give (1+2+4)/3 = 2.333; counting the empty sample would give 1.833.)
    x = T([[1.0, 2.0, float("inf")], [4.0, float("nan"), 9.0], [7.0, 8.0, 9.0]])
    mask = T([[1, 1, 0], [1, 0, 0], [0, 0, 0]])
    assert_close(masked_sample_mean(x, mask), T(2.75))


def test_masked_sample_mean_all_empty_is_zero_with_grad():
    x = torch.randn(2, 3, requires_grad=True)
    out = masked_sample_mean(x, torch.zeros(2, 3))
    assert_close(out, T(0.0))
    assert out.requires_grad
    out.backward()
    assert_close(x.grad, torch.zeros(2, 3))


# --- top-K reverse KL ----------------------------------------------------------------------------


def test_topk_reverse_kl_hand_case_v4_k2():
    # student p = [.4, .3, .2, .1]; teacher top-2 ids [1, 0] with probs [.5, .25], tail .25.
    # student bins: id1 .3, id0 .4, tail 1 - .7 = .3
    # KL = .3 ln(.3/.5) + .4 ln(.4/.25) + .3 ln(.3/.25)
    #    = .3(-.510826) + .4(.470004) + .3(.182322) = -.153248 + .188001 + .054697 = .089450
    student = T([[[0.4, 0.3, 0.2, 0.1]]]).log()
    t_lp = T([[[0.5, 0.25]]]).log()
    t_ids = T([[[1, 0]]])
    kl = topk_reverse_kl(student, t_lp, t_ids, torch.ones(1, 1))
    assert_close(kl, T([[0.089450]]), atol=1e-6, rtol=0)
    # raw logits (log-probs + a constant) give the same answer
    assert_close(topk_reverse_kl(student + 3.0, t_lp, t_ids, torch.ones(1, 1)), kl)


def test_topk_reverse_kl_zero_when_equal_positive_otherwise_and_grad():
    g = torch.Generator().manual_seed(0)
    B, Tn, V, K = 2, 3, 11, 4
    teacher = torch.log_softmax(torch.randn(B, Tn, V, generator=g), -1)
    t_lp, t_ids = teacher.topk(K, dim=-1)
    mask = T([[1, 1, 1], [1, 1, 0]])

    same = topk_reverse_kl(teacher.clone(), t_lp, t_ids, mask)
    assert_close(same, torch.zeros(B, Tn), atol=1e-6, rtol=0)

    logits = torch.randn(B, Tn, V, generator=g, requires_grad=True)
    kl = topk_reverse_kl(logits, t_lp, t_ids, mask)
    assert (kl[mask.bool()] > 1e-4).all()
    assert kl[1, 2] == 0.0  # padding
    masked_sample_mean(kl, mask).backward()
    assert logits.grad[mask.bool()].abs().sum() > 0
    assert_close(logits.grad[1, 2], torch.zeros(V))  # padding gets no gradient


def test_topk_reverse_kl_padding_with_junk_ids_is_safe():
    student = torch.log_softmax(torch.randn(1, 2, 5), -1)
    t_ids = T([[[0, 1], [-1, -1]]])  # padding position holds invalid ids
    t_lp = T([[[LN(0.6), LN(0.3)], [float("nan"), float("nan")]]])
    kl = topk_reverse_kl(student, t_lp, t_ids, T([[1, 0]]))
    assert torch.isfinite(kl).all() and kl[0, 1] == 0.0


# --- PPO clipped loss ----------------------------------------------------------------------------


def test_ppo_at_ratio_one_is_minus_sample_mean_of_advantage_and_grad():
    # rho = 1 everywhere -> per-token loss -A.
    # sample 0: token-mean(A) = (1+2)/2 = 1.5; sample 1: -3 -> loss = -(1.5 - 3)/2 = 0.75
    # (a flat token mean would give -(1+2-3)/3 = 0)
    old = T([[-1.0, -2.0, -0.5], [-0.7, -0.1, -0.1]])
    logp = old.clone().requires_grad_(True)
    adv = T([[1.0, 2.0, 5.0], [-3.0, 4.0, 4.0]])
    mask = T([[1, 1, 0], [1, 0, 0]])
    loss, stats = ppo_clipped_loss(logp, old, adv, mask)
    assert_close(loss, T(0.75))
    assert_close(stats["clip_fraction"], T(0.0))
    assert_close(stats["approx_kl"], T(0.0))
    # d loss / d logp_t = -A_t * rho / (n_tokens_of_sample * n_samples):
    # sample 0: -1/(2*2) = -.25, -2/(2*2) = -.5; sample 1: 3/(1*2) = 1.5; padding 0
    loss.backward()
    assert_close(logp.grad, T([[-0.25, -0.5, 0.0], [1.5, 0.0, 0.0]]))


def _one_token(rho: float, a: float, **kw):
    logp = T([[LN(rho)]], requires_grad=True)
    loss, stats = ppo_clipped_loss(logp, T([[0.0]]), T([[a]]), T([[1]]), **kw)
    loss.backward()
    return loss, stats, logp.grad


def test_ppo_positive_advantage_clipped_above_1_28():
    # rho = 1.5, A = 1: max(-1.5, -1.28) = -1.28; clipped -> zero gradient
    loss, stats, grad = _one_token(1.5, 1.0)
    assert_close(loss, T(-1.28))
    assert_close(grad, T([[0.0]]))
    assert_close(stats["clip_fraction"], T(1.0))
    # k3: (1.5 - 1) - ln 1.5 = .5 - .405465 = .094535; k1: -ln 1.5 = -.405465
    assert_close(stats["approx_kl"], T(0.094535))
    assert_close(stats["old_approx_kl"], T(-0.405465))


def test_ppo_negative_advantage_clipped_below_0_8():
    # rho = 0.5, A = -1: max(0.5, 0.8) = 0.8; clipped -> zero gradient
    loss, stats, grad = _one_token(0.5, -1.0)
    assert_close(loss, T(0.8))
    assert_close(grad, T([[0.0]]))
    assert_close(stats["clip_fraction"], T(1.0))


def test_ppo_unclipped_sides_keep_gradient():
    # rho = 0.5, A = +1: max(-0.5, -0.8) = -0.5 (low bound does not bind a positive A); grad -rho*A
    loss, stats, grad = _one_token(0.5, 1.0)
    assert_close(loss, T(-0.5))
    assert_close(grad, T([[-0.5]]))
    assert_close(stats["clip_fraction"], T(0.0))
    # rho = 1.5, A = -1: max(1.5, 1.28) = 1.5 (high bound does not bind a negative A)
    loss, _, grad = _one_token(1.5, -1.0)
    assert_close(loss, T(1.5))
    assert_close(grad, T([[1.5]]))


def test_ppo_asymmetric_bounds_matter():
    # rho = 1.25, A = +1: 1.25 < 1.28 -> NOT clipped: -1.25 (symmetric 0.2 would clip to -1.2)
    # rho = 0.75, A = -1: 0.75 < 0.8 -> clipped: max(.75, .8) = .8
    # two one-token samples: (-1.25 + .8)/2 = -.225; clip fraction 1/2
    logp = T([[LN(1.25)], [LN(0.75)]])
    old, adv, mask = torch.zeros(2, 1), T([[1.0], [-1.0]]), torch.ones(2, 1)
    loss, stats = ppo_clipped_loss(logp, old, adv, mask)
    assert_close(loss, T(-0.225))
    assert_close(stats["clip_fraction"], T(0.5))
    sym, _ = ppo_clipped_loss(logp, old, adv, mask, eps_high=0.2)
    assert_close(sym, T((-1.2 + 0.8) / 2))


def test_ppo_padding_and_empty_samples_never_contribute():
    # only token (0,0) is real: rho = 1, A = 1 -> loss -1. Padding holds a huge ratio and advantage,
    # and sample 1 is empty: it is left out of the mean (otherwise -0.5).
    logp = T([[0.0, 50.0], [30.0, 30.0]], requires_grad=True)
    old = T([[0.0, 0.0], [0.0, -float("inf")]])
    adv = T([[1.0, 1e6], [1e6, 1e6]])
    mask = T([[1, 0], [0, 0]])
    loss, stats = ppo_clipped_loss(logp, old, adv, mask)
    assert_close(loss, T(-1.0))
    loss.backward()
    assert_close(logp.grad, T([[-1.0, 0.0], [0.0, 0.0]]))
    assert all(torch.isfinite(v) for v in stats.values())


def test_ppo_all_empty_is_zero_with_grad():
    logp = torch.randn(2, 3, requires_grad=True)
    loss, stats = ppo_clipped_loss(logp, torch.zeros(2, 3), torch.ones(2, 3), torch.zeros(2, 3))
    assert_close(loss, T(0.0))
    loss.backward()
    assert_close(logp.grad, torch.zeros(2, 3))
    assert_close(stats["clip_fraction"], T(0.0))


def test_ppo_rejects_broadcastable_but_wrong_shapes():
    with pytest.raises(ValueError):
        ppo_clipped_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2, 1), torch.ones(2, 3))


# --- k3 KL ---------------------------------------------------------------------------------------


def test_k3_kl_zero_for_identical_inputs():
    lp = torch.log_softmax(torch.randn(3, 4), -1)
    assert_close(k3_kl(lp, lp.clone(), torch.ones(3, 4)), T(0.0))


def test_k3_kl_one_token_hand_number_and_grad():
    # logp = ln .5, ref = ln .25 -> d = ref - logp = ln .5 = -.693147
    # k3 = e^d - d - 1 = .5 + .693147 - 1 = .193147; d k3 / d logp = 1 - e^d = .5
    logp = T([[LN(0.5)]], requires_grad=True)
    kl = k3_kl(logp, T([[LN(0.25)]]), T([[1]]))
    assert_close(kl, T(0.193147))
    kl.backward()
    assert_close(logp.grad, T([[0.5]]))


def test_k3_kl_aggregates_per_sample_then_over_samples():
    # sample 0: tokens k3 = .193147 and 0 -> mean .0965736; sample 1: one token 0; padding ignored
    # (.0965736 + 0)/2 = .0482868
    logp = T([[LN(0.5), -1.0, 0.0], [-2.0, 5.0, 5.0]])
    ref = T([[LN(0.25), -1.0, 0.0], [-2.0, -9.0, -9.0]])
    mask = T([[1, 1, 0], [1, 0, 0]])
    assert_close(k3_kl(logp, ref, mask), T(0.0482868))
