r"""FedFA's feature augmentation (Zhou & Konukoglu, ICLR 2023) on node representations.

The FFA layer perturbs the *statistics* of each instance's features: with the instance's
per-channel mean :math:`\mu` and standard deviation :math:`\sigma`,

.. math::
    \hat{\mathbf x} = \hat\sigma \odot \frac{\mathbf x - \mu}{\sigma} + \hat\mu,\qquad
    \hat\mu = \mu + \epsilon_\mu \odot \hat\Sigma_\mu,\quad
    \hat\sigma = \sigma + \epsilon_\sigma \odot \hat\Sigma_\sigma,\quad
    \epsilon \sim \mathcal N(0, \mathbf I),

where the Gaussian's variance fuses the client-specific variance of the statistic over the
batch, :math:`\Sigma^2_{\mu}` (per channel), with the client-sharing variance
:math:`\Sigma^2_{\mu,g}` the server computes from every client's running statistic means:

.. math::
    s_c = \frac{1}{1 + 1/\Sigma^2_{\mu,g,c}},\qquad
    \gamma_{\mu,c} = C\,\frac{s_c}{\sum_{c'} s_{c'}},\qquad
    \hat\Sigma^2_{\mu} = (\gamma_\mu + 1)\odot\Sigma^2_{\mu}

(the same for :math:`\sigma`). It acts in training only (not in an evaluation that keeps
dropout), on a forward with probability ``prob``; without noise it is the identity.

**Instances on a graph.** An image's statistics are over its spatial positions; a node's
here are over its closed neighbourhood (itself and its in-neighbours, equally weighted: the
row-normalised :math:`\tilde{\mathbf D}^{-1}(\mathbf I + \mathbf A)` of ACM-GCN's low-pass
filter), so every node is an instance and the client's graph is the batch:
``mu = A h``, ``sigma = sqrt(A h^2 - mu^2 + eps)``, both ``[N, C]``.

:class:`FedFANet` puts one FFA layer where the classifier reads the backbone's
representations (``backbone.classifier(ffa(backbone.embed(x)))``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor, nn

from fgl_flower.models.acmgcn import acm_low_pass
from fgl_flower.models.sparse import GraphCache


def fusion_weights(sharing_var: Tensor, eps: float) -> Tensor:
    r""":math:`\gamma = C\,s / \sum s` with :math:`s = 1 / (1 + 1/(v + \epsilon))` for the
    client-sharing variance ``v [C]``: weights of mean 1 over the channels, larger where the
    clients' statistics disagree more."""
    s = 1.0 / (1.0 + 1.0 / (sharing_var + eps))
    return sharing_var.numel() * s / s.sum()


class FFALayer(nn.Module):
    """The feature-statistic augmentation of one representation ``[N, C]``.

    Buffers (all ``[C]``, federated like parameters): ``running_mean`` and ``running_std``,
    the momentum averages of the batch's mean statistic (what the server's client-sharing
    variance is computed from); ``sharing_var_mean`` and ``sharing_var_std``, that variance
    as the server sent it (ones before the first round, as in the official layer).
    """

    def __init__(
        self, channels: int, prob: float = 0.5, momentum: float = 0.99, eps: float = 1e-6
    ) -> None:
        super().__init__()
        self.prob, self.momentum, self.eps = prob, momentum, eps
        #: off while evaluating (:meth:`paused`): train mode alone (kept dropout) is not training
        self.active = True
        self.register_buffer("running_mean", torch.zeros(channels))
        self.register_buffer("running_std", torch.ones(channels))
        self.register_buffer("sharing_var_mean", torch.ones(channels))
        self.register_buffer("sharing_var_std", torch.ones(channels))
        self.reset_probes()

    def reset_probes(self) -> None:
        """Start counting training forwards, augmented ones and their relative shift."""
        self.forwards, self.applied, self.shift = 0, 0, 0.0

    @contextmanager
    def paused(self) -> Iterator[None]:
        """The identity inside the block even in train mode (an evaluation that keeps dropout)."""
        active, self.active = self.active, False
        try:
            yield
        finally:
            self.active = active

    @torch.no_grad()
    def reset_statistics(self) -> None:
        """Running statistic means back to their start, 0 and 1 (Algorithm 1, line 5)."""
        self.running_mean.zero_()
        self.running_std.fill_(1.0)

    def statistics(self, h: Tensor, adj: Tensor) -> tuple[Tensor, Tensor]:
        """Each node's neighbourhood mean and standard deviation, ``[N, C]`` each."""
        mu = adj @ h
        var = (adj @ (h * h) - mu * mu).clamp_min(0.0)
        return mu, (var + self.eps).sqrt()

    def forward(self, h: Tensor, adj: Tensor) -> Tensor:
        if not (self.training and self.active):
            return h
        self.forwards += 1
        if self.prob <= 0.0 or (self.prob < 1.0 and float(torch.rand(())) >= self.prob):
            return h  # (no coin drawn at prob 0 or 1: prob 0 leaves the random stream FedAvg's)
        mu, std = self.statistics(h, adj)
        with torch.no_grad():
            m = self.momentum
            self.running_mean.mul_(m).add_(mu.mean(dim=0), alpha=1 - m)
            self.running_std.mul_(m).add_(std.mean(dim=0), alpha=1 - m)
        scale_mu = (
            (fusion_weights(self.sharing_var_mean, self.eps) + 1) * (mu.var(dim=0) + self.eps)
        ).sqrt()
        scale_std = (
            (fusion_weights(self.sharing_var_std, self.eps) + 1) * (std.var(dim=0) + self.eps)
        ).sqrt()
        beta = mu + torch.randn_like(mu) * scale_mu
        gamma = std + torch.randn_like(std) * scale_std
        out = (h - mu) / std * gamma + beta
        with torch.no_grad():
            self.applied += 1
            self.shift += float((out - h).norm() / h.norm().clamp_min(1e-12))
        return out

    def probes(self) -> dict[str, float]:
        """``ffa.applied`` and ``ffa.shift`` (over the forwards since :meth:`reset_probes`;
        the shift only if one was augmented), ``ffa.gamma-std`` and ``ffa.gamma-std-sigma`` of
        the current sharing variances (the fusion weights' spread over channels)."""
        gamma = fusion_weights(self.sharing_var_mean, self.eps)
        gamma_sigma = fusion_weights(self.sharing_var_std, self.eps)
        out = {
            "ffa.applied": float(self.applied),
            "ffa.gamma-std": float(gamma.std(unbiased=False)),
            "ffa.gamma-std-sigma": float(gamma_sigma.std(unbiased=False)),
        }
        if self.applied:
            out["ffa.shift"] = self.shift / self.applied
        return out


class FedFANet(nn.Module):
    """``backbone.classifier(ffa(backbone.embed(x, edge_index)))``: a backbone with
    ``embed`` and a linear ``classifier`` (:class:`~fgl_flower.models.acmgcn.ACMGCN`) and one
    :class:`FFALayer` on the representations the classifier reads.

    Shapes: ``x [N, F]`` (dense or sparse), ``edge_index [2, E]`` -> logits ``[N, classes]``.
    """

    uses_edges = True

    def __init__(self, backbone: nn.Module, ffa: FFALayer) -> None:
        super().__init__()
        self.backbone = backbone
        self.ffa = ffa
        self._cache = GraphCache()

    def forward(self, x: Tensor, edge_index: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        h = self.backbone.embed(x, edge_index, edge_weight)
        if self.training:
            n = x.size(0)
            adj = self._cache.get(
                f"neighbourhood/{n}",
                (edge_index, edge_weight),
                lambda: acm_low_pass(edge_index, n, edge_weight, h.dtype),
            )
            h = self.ffa(h, adj)
        return self.backbone.classifier(h)
