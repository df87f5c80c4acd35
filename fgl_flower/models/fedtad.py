r"""FedTAD's server-side pieces (Zhu et al., IJCAI 2024): the class-conditional generator of
node features, the kNN pseudo-graph over its output, and the diversity loss.

The generator maps noise :math:`\mathbf z \in \mathbb R^{n \times d_z}` and class labels
:math:`\mathbf c \in \{0..C-1\}^n` to node features :math:`\tilde{\mathbf X} \in \mathbb R^{n
\times F}`: the labels' learned embedding (``[C, C]``) concatenated with the noise, three
``Linear -> Tanh`` layers of widths 64, 128, 256, and a linear output (the official
``FedTAD_ConGenerator`` with its dropout of 0).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from fgl_flower.models.knn import cosine_topk

#: Hidden widths of the generator (the official code's).
WIDTHS = (64, 128, 256)


class ConditionalGenerator(nn.Module):
    """``forward(z [n, noise_dim], c [n]) -> features [n, num_features]``."""

    def __init__(self, noise_dim: int, num_classes: int, num_features: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(num_classes, num_classes)
        dims = (noise_dim + num_classes, *WIDTHS)
        self.hidden = nn.Sequential(
            *[m for a, b in zip(dims[:-1], dims[1:]) for m in (nn.Linear(a, b), nn.Tanh())]
        )
        self.out = nn.Linear(WIDTHS[-1], num_features)

    def forward(self, z: Tensor, c: Tensor) -> Tensor:
        return self.out(self.hidden(torch.cat([self.embed(c), z], dim=1)))


def class_labels(num_gen: int, num_classes: int, device: torch.device | str = "cpu") -> Tensor:
    """``[num_gen]``: ``num_gen // C`` nodes of each class in order, the remainder added to the
    last class (the official code's fixed pseudo-labels)."""
    counts = [num_gen // num_classes] * num_classes
    counts[-1] += num_gen - sum(counts)
    return torch.repeat_interleave(
        torch.arange(num_classes, device=device), torch.tensor(counts, device=device)
    )


@torch.no_grad()
def knn_graph(x: Tensor, k: int) -> Tensor:
    r"""``edge_index [2, E]`` of the pseudo-graph over ``x [n, F]``: every node linked to its
    ``k`` most cosine-similar nodes (itself among them, as the official ``construct_graph``
    counts it), symmetrised, without self-loops (the GCN adds one per node, as the official
    graph's loops collapse to one in ``gcn_norm``). Not differentiable: the generator learns
    through the features only."""
    top = cosine_topk(x, k).indices
    adj = torch.zeros(x.size(0), x.size(0), dtype=torch.bool, device=x.device)
    adj.scatter_(1, top, True)
    adj = adj | adj.t()
    adj.fill_diagonal_(False)
    return adj.nonzero().t()


def diversity_loss(z: Tensor, x: Tensor) -> Tensor:
    r""":math:`\exp\big(-\mathrm{mean}_{i,j}\,[\mathrm{mean}_d (z_{id} - z_{jd})^2 \cdot
    \mathrm{mean}_f |x_{if} - x_{jf}|]\big)` over all pairs (the official ``DiversityLoss``,
    L1 on the outputs, L2 on the noise): small when different noise gives different nodes."""
    noise = (z[:, None, :] - z[None, :, :]).pow(2).mean(dim=2)
    out = torch.cdist(x, x, p=1) / x.size(1)  # [n, n] without the [n, n, F] difference tensor
    return torch.exp(-(noise * out).mean())
