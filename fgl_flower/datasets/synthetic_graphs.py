r"""Synthetic graph classification: a seeded, file-free set of small graphs whose class is
in their community structure (the graph-level demo dataset, as ``synthetic`` is for nodes).

Graph :math:`g` of class :math:`c \in \{0, \dots, C-1\}` (classes balanced, in turn):

* :math:`n_g \sim U\{n_{min}, \dots, n_{max}\}` nodes, split into :math:`c + 1` near-equal
  communities;
* every pair of nodes is linked with probability :math:`p_{in}` inside a community and
  :math:`p_{out}` across, with :math:`p_{in}` chosen so that the expected degree is
  :math:`\bar d` whatever the class (so degree alone does not tell the classes apart; the
  number of communities does);
* node features :math:`x_i = s\,\mu_c + \varepsilon_i`, class means :math:`\mu_c \sim
  \mathcal N(0, I_F)` drawn once, :math:`\varepsilon_i \sim \mathcal N(0, I_F)`,
  :math:`s` = ``feature-signal`` (default 0.3: a weak feature signal; structure-aware
  models such as FedStar's and FedDense's structural channel have the rest to find).

Self-loops are absent and edges undirected (both directions in ``edge_index``).

With ``target = regression`` the same graphs carry a real target instead of their class
(graph regression's offline default):

.. math::
    y_g = \frac{c_g}{C - 1} + \frac{1}{n_g} \sum_i x_i^\top w, \qquad
    w \sim \mathcal N(0, I_F / F)

(``w`` drawn once from a stream of its own, so the graphs are those of the class target):
half structure (the community count), half a linear read-out of the mean node feature.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from fgl_flower.datasets.options import Option
from fgl_flower.errors import ConfigError

if TYPE_CHECKING:
    from torch_geometric.data import InMemoryDataset

#: Options of the ``synthetic-graphs`` dataset (all reach the run config's ``data.*`` options).
SYNTHETIC_GRAPH_OPTIONS: dict[str, Option] = {
    "num-graphs": Option(int, 600, "number of graphs"),
    "num-classes": Option(int, 3, "classes (graphs of class c have c + 1 communities)"),
    "num-features": Option(int, 8, "feature dimension"),
    "min-nodes": Option(int, 12, "fewest nodes of a graph"),
    "max-nodes": Option(int, 30, "most nodes of a graph"),
    "avg-degree": Option(float, 4.0, "expected average degree, the same for every class"),
    "p-out": Option(float, 0.02, "link probability across communities"),
    "feature-signal": Option(float, 0.3, "scale of the class mean in the node features"),
    "data-seed": Option(int, 0, "seed of the generated graphs"),
    "target": Option(str, "class", "class | regression (a real target per graph, see the module)"),
}


def _check(
    num_graphs: int,
    num_classes: int,
    num_features: int,
    min_nodes: int,
    max_nodes: int,
    avg_degree: float,
    p_out: float,
    feature_signal: float,
) -> None:
    if num_classes < 2 or num_graphs < 2 * num_classes:
        raise ConfigError(
            "synthetic-graphs: need num-classes >= 2 and num-graphs >= 2 * num-classes."
        )
    if num_features < 1 or feature_signal < 0:
        raise ConfigError("synthetic-graphs: need num-features >= 1 and feature-signal >= 0.")
    if not 2 * num_classes <= min_nodes <= max_nodes:
        raise ConfigError(
            f"synthetic-graphs: need 2 * num-classes <= min-nodes <= max-nodes "
            f"(got {min_nodes}, {max_nodes}): every community needs two nodes."
        )
    if not 0 <= p_out < 1 or avg_degree <= 0:
        raise ConfigError("synthetic-graphs: need p-out in [0, 1) and avg-degree > 0.")


def _edges(
    sizes: np.ndarray, avg_degree: float, p_out: float, rng: np.random.Generator
) -> np.ndarray:
    """Undirected SBM edges ``[2, E]`` (both directions) for communities of ``sizes``:
    :math:`p_{in}` set so that the expected degree is ``avg_degree`` (capped at 1)."""
    n = int(sizes.sum())
    block = np.repeat(np.arange(len(sizes)), sizes)
    same = block[:, None] == block[None, :]
    inside = (same.sum() - n) / n  # mean number of other nodes in one's community
    across = n - 1 - inside
    p_in = min(1.0, max(avg_degree - p_out * across, 0.0) / max(inside, 1.0))
    prob = np.where(same, p_in, p_out)
    upper = np.triu(rng.random((n, n)) < prob, k=1)
    src, dst = np.nonzero(upper)
    return np.stack([np.concatenate([src, dst]), np.concatenate([dst, src])])


def synthetic_graphs(
    num_graphs: int = 600,
    num_classes: int = 3,
    num_features: int = 8,
    min_nodes: int = 12,
    max_nodes: int = 30,
    avg_degree: float = 4.0,
    p_out: float = 0.02,
    feature_signal: float = 0.3,
    seed: int = 0,
    target: str = "class",
) -> InMemoryDataset:
    """Sample the graphs (see module docstring).

    Returns:
        A PyG ``InMemoryDataset`` of ``num_graphs`` graphs, each with ``x`` [n, F] float32,
        undirected ``edge_index`` [2, E] and ``y`` [1] long (``target = regression``:
        float32); ``num_classes`` = C (regression: 1).
    """
    import torch
    from torch_geometric.data import Data, InMemoryDataset

    if target not in ("class", "regression"):
        raise ConfigError(f"synthetic-graphs: target={target!r}; use class or regression.")
    _check(
        num_graphs,
        num_classes,
        num_features,
        min_nodes,
        max_nodes,
        avg_degree,
        p_out,
        feature_signal,
    )
    rng = np.random.default_rng(seed)
    means = rng.standard_normal((num_classes, num_features))
    graphs = []
    for g in range(num_graphs):
        c = g % num_classes
        n = int(rng.integers(min_nodes, max_nodes + 1))
        sizes = np.full(c + 1, n // (c + 1))
        sizes[: n % (c + 1)] += 1
        edge_index = _edges(sizes, avg_degree, p_out, rng)
        x = feature_signal * means[c] + rng.standard_normal((n, num_features))
        graphs.append(
            Data(
                x=torch.tensor(x, dtype=torch.float32),
                edge_index=torch.from_numpy(edge_index).long(),
                y=torch.tensor([c], dtype=torch.long),
            )
        )

    if target == "regression":
        w = np.random.default_rng([seed, 1]).standard_normal(num_features) / np.sqrt(num_features)
        for g in graphs:
            c = int(g.y[0])
            real = c / (num_classes - 1) + float(g.x.numpy().mean(0) @ w)
            g.y = torch.tensor([real], dtype=torch.float32)

    class SyntheticGraphs(InMemoryDataset):
        """The generated graphs, held in memory (no root folder, nothing written)."""

        def __init__(self) -> None:
            super().__init__(None)
            self.data, self.slices = self.collate(graphs)

    return SyntheticGraphs()
