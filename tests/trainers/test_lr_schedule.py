"""The learning-rate schedule against hand-computed rates, and the per-term gradient norms against
gradients taken one term at a time."""
import math

import pytest
import torch

from trainers.lr_schedule import lr_at
from trainers.update import backward_by_term


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
