r"""FED-PUB's masked GCN (Baek et al., ICML 2023): two GCN layers and a linear classifier
whose weights are multiplied element-wise by personalised masks.

Every weight matrix :math:`\mathbf W` (``conv1``, ``conv2``: ``[H, F]`` and ``[H, H]``;
``clsif``: ``[C, H]``) has a mask :math:`\mathbf M` of its shape (``masks.<layer>``, ones at
the start, as the official scripts run it). A layer computes with
:math:`\mathbf W \odot \mathbf M` in training and with :math:`\mathbf W \odot
\mathrm{prune}(\mathbf M)` in evaluation, where :math:`\mathrm{prune}` zeroes the entries with
:math:`|m| < \lambda_1` (``l1``):

.. math::
    \mathbf H_1 &= \mathrm{Dropout}(\mathrm{ReLU}(\hat{\mathbf A}\mathbf X(\mathbf W_1\odot\mathbf M_1)^\top + \mathbf b_1)) \\
    \mathbf H_2 &= \hat{\mathbf A}\mathbf H_1(\mathbf W_2\odot\mathbf M_2)^\top + \mathbf b_2 \\
    \mathbf Y &= \mathrm{Dropout}(\mathrm{ReLU}(\mathbf H_2))(\mathbf W_c\odot\mathbf M_c)^\top + \mathbf b_c

with :math:`\hat{\mathbf A}` GCN's normalised adjacency with self-loops. The weights
(``conv1.*``, ``conv2.*``, ``clsif.*``) are federated; the masks stay on the client.
:meth:`MaskedGCN.embed` returns :math:`\mathbf H_2` (before its ReLU): averaged over the
nodes of the proxy graph it is the client's functional embedding.

:class:`MaskedBackbone` puts the same masks on another node backbone (``fedpub.backbone =
"model"``: the run's ``model``, e.g. ACM-GCN where a table runs every method on it): every
parameter with two or more dimensions gets a mask of its shape, and the backbone's ``embed``
gives the functional embedding.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call
from torch_geometric.nn import GCNConv

#: The federated layers; each has a mask ``masks.<layer>`` of its weight's shape.
LAYERS = ("conv1", "conv2", "clsif")


class MaskedGCNConv(GCNConv):
    """PyG's :class:`GCNConv` (same parameters, initialisation and normalisation) whose
    weight is multiplied by a mask given to :meth:`forward`."""

    def forward(self, x: Tensor, edge_index: Tensor, mask: Tensor) -> Tensor:  # type: ignore[override]
        edge_index, edge_weight = self._normalized(edge_index, x.size(0), x.dtype)
        x = F.linear(x, self.lin.weight * mask)
        out = self.propagate(edge_index, x=x, edge_weight=edge_weight)
        return out + self.bias

    def _normalized(
        self, edge_index: Tensor, num_nodes: int, dtype: torch.dtype
    ) -> tuple[Tensor, Tensor]:
        from torch_geometric.nn.conv.gcn_conv import gcn_norm

        return gcn_norm(
            edge_index, None, num_nodes, self.improved, self.add_self_loops, self.flow, dtype
        )


class _Masks:
    """The mask bookkeeping both masked models share: ``self.masks`` (a ``ParameterDict``)
    and ``self.l1`` (the pruning threshold)."""

    masks: nn.ParameterDict
    l1: float
    training: bool

    def mask(self, key: str) -> Tensor:
        """``masks.<key>`` as the model uses it: raw in training, pruned in evaluation."""
        m = self.masks[key]
        return m if self.training else m.masked_fill(m.abs() < self.l1, 0.0)

    def pruned_share(self) -> float:
        """Share of mask entries that evaluation zeroes (``|m| < l1``)."""
        with torch.no_grad():
            pruned = sum(int((m.abs() < self.l1).sum()) for m in self.masks.values())
            return pruned / sum(m.numel() for m in self.masks.values())


def _init_masks(masks: nn.ParameterDict, mask_init: str) -> None:
    """``"ones"`` leaves the masks at 1; ``"xavier"`` draws them Xavier-uniform."""
    if mask_init == "xavier":
        for m in masks.values():
            nn.init.xavier_uniform_(m)


class MaskedGCN(_Masks, nn.Module):
    """``conv1`` (F→H), ``conv2`` (H→H) and ``clsif`` (H→C), masked (module docstring).

    Args:
        num_features, hidden, num_classes: the layer widths.
        dropout: after each ReLU.
        l1: masks below this (in absolute value) are zeroed at evaluation.
        mask_init: ``"ones"`` or ``"xavier"`` (Xavier-uniform masks).
    """

    def __init__(
        self,
        num_features: int,
        hidden: int,
        num_classes: int,
        dropout: float = 0.5,
        l1: float = 1e-3,
        mask_init: str = "ones",
    ) -> None:
        super().__init__()
        self.dropout, self.l1 = dropout, l1
        self.conv1 = MaskedGCNConv(num_features, hidden)
        self.conv2 = MaskedGCNConv(hidden, hidden)
        self.clsif = nn.Linear(hidden, num_classes)
        # the official MaskedLinear: Xavier-uniform weight, and its [1, C] bias as well
        nn.init.xavier_uniform_(self.clsif.weight)
        bound = math.sqrt(6.0 / (1 + num_classes))
        nn.init.uniform_(self.clsif.bias, -bound, bound)
        shapes = {
            "conv1": self.conv1.lin.weight.shape,
            "conv2": self.conv2.lin.weight.shape,
            "clsif": self.clsif.weight.shape,
        }
        self.masks = nn.ParameterDict({k: nn.Parameter(torch.ones(s)) for k, s in shapes.items()})
        _init_masks(self.masks, mask_init)

    def embed(self, x: Tensor, edge_index: Tensor) -> Tensor:
        """``H_2 [N, H]``: the second layer's output before its ReLU."""
        h = F.relu(self.conv1(x, edge_index, self.mask("conv1")))
        h = F.dropout(h, self.dropout, self.training)
        return self.conv2(h, edge_index, self.mask("conv2"))

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        h = F.dropout(F.relu(self.embed(x, edge_index)), self.dropout, self.training)
        return F.linear(h, self.clsif.weight * self.mask("clsif"), self.clsif.bias)


class _Method(nn.Module):
    """Calls ``net.<name>`` as its forward, so :func:`torch.func.functional_call` can run a
    method other than ``forward`` with substituted parameters (``net.<param>`` keys)."""

    def __init__(self, net: nn.Module, name: str) -> None:
        super().__init__()
        self.net, self.name = net, name

    def forward(self, *args):
        return getattr(self.net, self.name)(*args)


class MaskedBackbone(_Masks, nn.Module):
    r"""FED-PUB's personalised masks on a node backbone ``net`` (module docstring).

    Every parameter :math:`\mathbf W` of ``net`` with two or more dimensions computes as
    :math:`\mathbf W \odot \mathbf M` in training and :math:`\mathbf W \odot
    \mathrm{prune}(\mathbf M)` in evaluation; biases are not masked. The backbone's
    parameters are ``net.*`` (federated), the masks ``masks.<name>`` with the parameter's
    dots written ``__`` (local). ``forward(x [N, F], edge_index, edge_weight=None) -> [N, C]``
    and ``embed(...) -> [N, d]`` are the backbone's, on the masked weights.

    Args:
        net: the backbone; it must have ``embed`` (the functional embedding's source).
        l1, mask_init: as :class:`MaskedGCN`'s.
    """

    def __init__(self, net: nn.Module, l1: float = 1e-3, mask_init: str = "ones") -> None:
        super().__init__()
        if not callable(getattr(net, "embed", None)):
            raise ValueError(
                f"{type(net).__name__} has no embed(): FED-PUB's functional embedding needs one."
            )
        self.net, self.l1 = net, l1
        self.uses_edges = getattr(net, "uses_edges", True)
        self.masked = tuple(n for n, p in net.named_parameters() if p.dim() >= 2)
        self.masks = nn.ParameterDict(
            {
                mask_key(n): nn.Parameter(torch.ones_like(p.detach()))
                for n, p in net.named_parameters()
                if n in self.masked
            }
        )
        _init_masks(self.masks, mask_init)

    def masked_weights(self) -> dict[str, Tensor]:
        """``{name: W ⊙ M}`` for every masked parameter of ``net`` (pruned in evaluation)."""
        params = dict(self.net.named_parameters())
        return {n: params[n] * self.mask(mask_key(n)) for n in self.masked}

    def forward(self, x: Tensor, edge_index: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        return functional_call(self.net, self.masked_weights(), (x, edge_index, edge_weight))

    def embed(self, x: Tensor, edge_index: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        weights = {f"net.{n}": w for n, w in self.masked_weights().items()}
        return functional_call(_Method(self.net, "embed"), weights, (x, edge_index, edge_weight))


def mask_key(name: str) -> str:
    """The ``masks`` key of backbone parameter ``name`` (``ParameterDict`` keys hold no dots)."""
    return name.replace(".", "__")


@functools.lru_cache(maxsize=4)
def proxy_graph(
    seed: int, num_features: int, graphs: int = 5, nodes: int = 100, p: float = 0.1
) -> tuple[Tensor, Tensor]:
    r"""FED-PUB's proxy input: ``graphs`` random graphs of ``nodes`` nodes each (an edge
    inside a graph with probability ``p``, none between them: networkx's
    ``random_partition_graph`` with ``p_out = 0``, from ``seed``) with
    :math:`\mathcal N(0, 1)` features ``[graphs * nodes, num_features]`` (a generator seeded
    with ``seed``). Returns ``(x, edge_index)`` on the CPU, both directions of every edge;
    the same for every client of a run. Treat as read-only (cached per process)."""
    import networkx as nx

    g = nx.random_partition_graph([nodes] * graphs, p_in=p, p_out=0.0, seed=seed)
    edges = torch.tensor(sorted(g.edges()), dtype=torch.long).reshape(-1, 2).t()
    edge_index = torch.cat([edges, edges.flip(0)], dim=1)
    x = torch.randn(graphs * nodes, num_features, generator=torch.Generator().manual_seed(seed))
    return x, edge_index
