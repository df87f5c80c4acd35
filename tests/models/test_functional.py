"""models/functional.py: the CPU dropout keeps F.dropout's distribution and scaling."""

import torch
import torch.nn.functional as F

from fgl_flower.models.functional import dropout


def test_dropout_keeps_one_minus_p_scaled_and_passes_gradients_through_the_mask():
    torch.manual_seed(0)
    x = torch.ones(200_000, requires_grad=True)
    out = dropout(x, 0.3, True)
    kept = out != 0
    assert abs(kept.float().mean().item() - 0.7) < 0.005
    assert torch.allclose(out[kept], torch.full_like(out[kept], 1 / 0.7))
    assert abs(out.mean().item() - 1.0) < 0.01  # unbiased, as F.dropout
    out.sum().backward()
    assert torch.equal(x.grad, out.detach())


def test_dropout_is_the_identity_outside_training_and_zero_at_p_one():
    x = torch.randn(5, 4)
    assert dropout(x, 0.5, False) is x and dropout(x, 0.0, True) is x
    assert torch.equal(dropout(x, 1.0, True), F.dropout(x, 1.0, True))


def test_dropout_is_seeded_by_the_global_generator():
    x = torch.randn(50, 8)
    torch.manual_seed(3)
    a = dropout(x, 0.5, True)
    torch.manual_seed(3)
    assert torch.equal(a, dropout(x, 0.5, True))
