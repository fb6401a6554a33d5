"""The learning-rate schedule and its warmup against hand-computed rates, and the per-term gradient norms
against gradients taken one term at a time."""
import math

import pytest
import torch

from nextstate.types import Sample
from trainers.lr_schedule import lr_at, warmup_factor
from trainers.update import UpdateConfig, backward_by_term, optimizer_steps, ppo_update


def test_constant_rate_is_the_same_at_every_update():
    assert [lr_at(1e-4, "constant", i, 16, 0.1) for i in (0, 7, 15)] == [1e-4, 1e-4, 1e-4]


def test_linear_rate_falls_from_lr_to_its_floor():
    # 5 updates, floor 0.2: 1, 0.8, 0.6, 0.4, 0.2 of the rate
    rates = [lr_at(1.0, "linear", i, 5, 0.2) for i in range(5)]
    assert rates == pytest.approx([1.0, 0.8, 0.6, 0.4, 0.2])


def test_cosine_rate_is_half_way_in_the_middle():
    # 3 updates, floor 0: cos(0) -> 1, cos(pi/2) -> 0.5, cos(pi) -> 0
    assert [lr_at(2.0, "cosine", i, 3, 0.0) for i in range(3)] == pytest.approx([2.0, 1.0, 0.0])
    assert lr_at(1.0, "cosine", 1, 4, 0.1) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 3)))


def test_a_run_past_its_planned_iterations_stays_at_the_floor():
    assert lr_at(1.0, "linear", 40, 5, 0.3) == pytest.approx(0.3)


def test_an_unknown_schedule_is_refused_by_name():
    with pytest.raises(ValueError, match="mode.lr_schedule must be one of constant, linear, cosine"):
        lr_at(1.0, "exponential", 0, 4, 0.1)


def test_warmup_rises_linearly_over_its_steps_then_stays_at_the_rate():
    # 4 warmup steps: 1/4, 2/4, 3/4, 4/4 of the rate, then the rate
    assert [warmup_factor(k, 4) for k in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    assert [warmup_factor(k, 0) for k in (0, 9)] == [1.0, 1.0]  # no warmup


def _tiny_lm():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                        num_attention_heads=2, num_key_value_heads=2))


def test_an_update_takes_its_warmup_rate_step_by_step_and_a_new_optimizer_on_the_same_state_goes_on():
    model = _tiny_lm()
    opt = torch.optim.AdamW(model.parameters(), lr=1.0)
    samples = [Sample([1, 2, 3], [4, 5], [-3.0, -3.0], [1.0, 1.0]), Sample([1, 6], [7], [-3.0], [-1.0])]
    cfg = UpdateConfig(2.0, 0.0, 1.0, 1, 1, 0.2, 0.28, 0.0, 1.0, lr_warmup_steps=3)  # 2 steps an update
    first = ppo_update(model, opt, samples, cfg, generator=torch.Generator().manual_seed(0))
    assert first["updates"] == 2 and first["lr"] == pytest.approx(2.0 * (1 / 3 + 2 / 3) / 2)
    # the step count is the optimizer's (saved with its checkpoint): a resumed run's optimizer goes on
    resumed = torch.optim.AdamW(model.parameters(), lr=1.0)
    resumed.load_state_dict(opt.state_dict())
    assert optimizer_steps(resumed) == 2
    second = ppo_update(model, resumed, samples, cfg, generator=torch.Generator().manual_seed(1), lr=1.0)
    assert second["lr"] == pytest.approx((1.0 + 1.0) / 2)  # step 3 of 3, then past the warmup
    other = _tiny_lm()
    plain = ppo_update(other, torch.optim.AdamW(other.parameters()), samples,
                       UpdateConfig(2.0, 0.0, 1.0, 1, 1, 0.2, 0.28, 0.0, 1.0))
    assert plain["lr"] == 2.0


def test_term_gradients_add_up_and_each_norm_is_its_own():
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(3))
    a = (w ** 2).sum()            # gradient 2w
    b = (3.0 * w).sum()           # gradient 3
    frozen = torch.zeros((), requires_grad=False)  # a term that is off (kl_coef 0) is skipped
    norms = backward_by_term({"pg": a, "opd_topk": b, "kl": frozen}, [w])
    assert set(norms) == {"pg", "opd_topk"}
    assert norms["pg"] == pytest.approx(float((2 * w.detach()).norm()))
    assert norms["opd_topk"] == pytest.approx(3 * math.sqrt(3))
    assert torch.allclose(w.grad, 2 * w.detach() + 3.0)
