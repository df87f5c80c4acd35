r"""FedSpray's global feature-structure encoder (Fu et al., KDD 2024, §4.2).

Three one-layer components, shared by all clients and averaged by the server:

.. math::
    \mathbf e_i = \mathrm{ReLU}(\mathbf x_i W_e + b_e), \qquad
    \mathbf p_i = \mathrm{softmax}\big((\mathbf e_i + \mathbf s_i) W_p + b_p\big), \qquad
    \mathbf q_i = \mathrm{softmax}(\mathbf e_i W_q + b_q)

with :math:`\mathbf s_i \in \mathbb R^{d_s}` the node's structure proxy
(Combine = addition, so the embedding width equals the proxy width :math:`d_s`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fgl_flower.models.sparse import GraphCache, feature_matmul


class MLPLayer(nn.Module):
    r"""Affine map :math:`\mathbf x W + b` with ``W`` stored as ``[in, out]``.

    Weight and bias are drawn from :math:`U(-1/\sqrt{\mathrm{out}}, 1/\sqrt{\mathrm{out}})`,
    the initialisation of the official code. ``x`` may be a sparse COO tensor ``[N, in]``.
    """

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_channels, out_channels))
        self.bias = nn.Parameter(torch.empty(out_channels))
        self._cache = GraphCache()
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.weight.size(1))
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: Tensor) -> Tensor:
        return feature_matmul(x, self.weight, self._cache) + self.bias


class FeatureStructureEncoder(nn.Module):
    r"""Embedding layer :math:`g_e`, classifier :math:`g_p` and projector :math:`g_q`.

    Args:
        in_channels: Feature dimension :math:`d_x`.
        num_classes: :math:`d_c`.
        proxy_dim: :math:`d_s`, width of embeddings and structure proxies.

    Shapes: ``x [N, d_x]`` (dense or sparse) → ``e [N, d_s]``; ``e, s [N, d_s]`` →
    logits ``[N, d_c]``.
    """

    def __init__(self, in_channels: int, num_classes: int, proxy_dim: int = 64) -> None:
        super().__init__()
        self.embed = MLPLayer(in_channels, proxy_dim)
        self.classifier = MLPLayer(proxy_dim, num_classes)
        self.projector = MLPLayer(proxy_dim, num_classes)

    def embedding(self, x: Tensor) -> Tensor:
        """:math:`\\mathbf e = \\mathrm{ReLU}(g_e(\\mathbf x))`."""
        return F.relu(self.embed(x))

    def teacher_logits(self, e: Tensor, proxies: Tensor) -> Tensor:
        """Logits of :math:`\\mathbf p`: the classifier over ``e + proxies``."""
        return self.classifier(e + proxies)

    def projector_logits(self, e: Tensor) -> Tensor:
        """Logits of :math:`\\mathbf q`: the proxy-free projector."""
        return self.projector(e)


def initial_proxies(num_classes: int, proxy_dim: int) -> Tensor:
    r"""The official code's :math:`\mathbf S_0`: row :math:`j` is :math:`0.01\,j\,\mathbf 1`."""
    return (
        0.01
        * torch.arange(num_classes, dtype=torch.float32)
        .unsqueeze(1)
        .expand(num_classes, proxy_dim)
        .clone()
    )
