"""model/speed/kernels.py: nn.Dropout's mask, drawn four to a random word on a CPU."""

import pytest
import torch

from model.speed.kernels import CheapDropout as Dropout, keep_mask


@pytest.mark.parametrize("p", [0.2, 0.5, 0.9])
def test_the_mask_keeps_each_element_with_probability_1_minus_p_in_every_lane_of_a_word(p):
    torch.manual_seed(0)
    keep, used = keep_mask((400_000,), p, "cpu")
    assert used == round(p * 32768) / 32768 and abs(used - p) <= 1 / 65536
    lanes = keep.view(-1, 4).float().mean(0)  # the four 15-bit draws of each 64-bit word
    # 100,000 draws a lane: the standard error of a share is at most 0.0016, so 0.006 is nearly 4 of them
    assert torch.all((lanes - (1 - used)).abs() < 0.006), lanes


def test_kept_values_are_scaled_by_1_over_1_minus_p_and_the_gradient_follows_the_mask():
    torch.manual_seed(1)
    drop, x = Dropout(0.2).train(), torch.randn(3, 50, 8, requires_grad=True)
    y = drop(x)
    kept = y != 0
    scale = 1 / (1 - round(0.2 * 32768) / 32768)
    torch.testing.assert_close(y[kept], x[kept] * scale)
    y.sum().backward()
    torch.testing.assert_close(x.grad, kept.float() * scale)
    assert 0.7 < kept.float().mean() < 0.9


def test_eval_mode_and_p_0_are_the_identity_and_the_same_seed_draws_the_same_mask():
    x = torch.randn(4, 16)
    assert torch.equal(Dropout(0.3).eval()(x), x) and torch.equal(Dropout(0.0).train()(x), x)
    torch.manual_seed(7)
    first = Dropout(0.3).train()(x)
    torch.manual_seed(7)
    assert torch.equal(Dropout(0.3).train()(x), first)  # the generator's state decides it: resume stays exact
    assert torch.equal(Dropout(1.0).train()(x), torch.zeros_like(x))
