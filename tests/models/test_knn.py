"""The one cosine k-NN builder the methods' k-NN graphs share."""

import torch

from fgl_flower.models.knn import cosine_topk


def test_cosine_topk_by_hand():
    x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [-1.0, 0.0]])
    top = cosine_topk(x, 2)
    assert top.indices[:, 0].tolist() == [0, 1, 2, 3]  # each row is most similar to itself
    assert top.indices[0, 1] == 1 and top.indices[2, 1] == 1
    without = cosine_topk(x, 1, self_loops=False)
    assert without.indices[:, 0].tolist() == [1, 0, 1, 2]
    assert torch.allclose(without.values[0], torch.nn.functional.cosine_similarity(x[0:1], x[1:2]))


def test_values_carry_the_gradient():
    x = torch.randn(6, 3, requires_grad=True)
    cosine_topk(x, 3).values.sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0
