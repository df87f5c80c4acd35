r"""Link prediction: a node encoder and an edge decoder.

The encoder is the run's node backbone (``model``, ``hidden``, ``num-layers``) with
``hidden`` output channels: :math:`Z = f_\theta(X, A_{\mathrm{train}})` [N, h]. A pair
:math:`(u, v)` scores

* ``dot``: :math:`s_{uv} = z_u^\top z_v` (the usual GAE decoder; OpenFGL's);
* ``mlp``: :math:`s_{uv} = W_2\,\mathrm{ReLU}(W_1 (z_u \odot z_v) + b_1) + b_2`, a two-layer
  MLP on the Hadamard product (symmetric in :math:`u, v`).

Scores are logits: :math:`\sigma(s_{uv})` is the probability of an edge.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

#: ``link-decoder`` values.
DECODERS = ("dot", "mlp")


class LinkPredictor(nn.Module):
    """``encoder`` [N, F] -> [N, h] and a decoder over node pairs; every parameter shared."""

    def __init__(self, encoder: nn.Module, decoder: str, hidden: int) -> None:
        super().__init__()
        if decoder not in DECODERS:
            raise ValueError(f"link decoder {decoder!r}: use one of {', '.join(DECODERS)}")
        self.encoder = encoder
        self.decoder = (
            nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))
            if decoder == "mlp"
            else None
        )

    def forward(self, x: Tensor, edge_index: Tensor, pairs: Tensor | None = None) -> Tensor:
        """Node embeddings ``[N, h]`` on the message-passing graph ``edge_index``; with
        ``pairs`` [2, P], the logits ``[P]`` of those pairs."""
        z = self.encoder(x, edge_index)
        return z if pairs is None else self.score(z, pairs)

    def score(self, z: Tensor, pairs: Tensor) -> Tensor:
        """Logits ``[P]`` of the node pairs ``pairs`` [2, P] from embeddings ``z`` [N, h]."""
        product = z[pairs[0]] * z[pairs[1]]
        if self.decoder is None:
            return product.sum(-1)
        return self.decoder(product).view(-1)


def link_loss(pos: Tensor, neg: Tensor) -> Tensor:
    """Binary cross-entropy with logits: positives labelled 1, negatives 0, averaged over
    all :math:`P + Q` pairs."""
    logits = torch.cat([pos, neg])
    labels = torch.cat([torch.ones_like(pos), torch.zeros_like(neg)])
    return nn.functional.binary_cross_entropy_with_logits(logits, labels)
