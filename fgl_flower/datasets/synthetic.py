r"""Contextual stochastic block model (CSBM): a seeded, file-free node-classification graph.

Generation, for :math:`n` nodes and :math:`C` classes:

* **Class sizes** :math:`n_c \propto (1-\rho)^c` for imbalance :math:`\rho\in[0,1)`
  (:math:`\rho=0`: balanced; :math:`\rho=0.5`: each class half the previous one).
* **Features** :math:`x_i = \mu_{y_i} + \sigma\,\varepsilon_i`, with class means
  :math:`\mu_c \sim \mathcal N(0, I_F)` drawn once and :math:`\varepsilon_i\sim\mathcal N(0,I_F)`.
* **Edges**: :math:`m = n\bar d/2` undirected edges. Each picks a uniform source node;
  with probability :math:`h` (the homophily) its target is uniform within the source's
  class, else uniform among the other classes' nodes. Self-loops and duplicates are
  dropped, so the edge homophily is :math:`\approx h`.

The default (:math:`\sigma=2`, :math:`h=0.8`, :math:`\bar d=8`) is hard for an MLP
but easy for a GCN, which averages the noise out over same-class neighbours.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from fgl_flower.datasets.options import Option
from fgl_flower.errors import ConfigError

if TYPE_CHECKING:
    from torch_geometric.data import Data

#: Options accepted by the ``synthetic`` dataset (all reach the run config's options).
SYNTHETIC_OPTIONS: dict[str, Option] = {
    "num-nodes": Option(int, 1000, "number of nodes"),
    "num-classes": Option(int, 4, "number of classes"),
    "num-features": Option(int, 32, "feature dimension"),
    "avg-degree": Option(float, 8.0, "expected average degree"),
    "homophily": Option(float, 0.8, "fraction of intra-class edges, in [0, 1]"),
    "imbalance": Option(float, 0.0, "geometric class-size decay rho in [0, 1); 0 = balanced"),
    "feature-noise": Option(float, 2.0, "std of the Gaussian feature noise"),
    "data-seed": Option(int, 0, "seed of the generated graph"),
}


def class_sizes(num_nodes: int, num_classes: int, imbalance: float) -> np.ndarray:
    """Sizes :math:`\\propto (1-\\rho)^c` summing to ``num_nodes``, each at least 1."""
    weights = (1.0 - imbalance) ** np.arange(num_classes)
    sizes = np.maximum(1, np.floor(num_nodes * weights / weights.sum())).astype(np.int64)
    sizes[0] += num_nodes - sizes.sum()  # remainder to the largest class
    return sizes


def contextual_sbm(
    num_nodes: int = 1000,
    num_classes: int = 4,
    num_features: int = 32,
    avg_degree: float = 8.0,
    homophily: float = 0.8,
    imbalance: float = 0.0,
    feature_noise: float = 2.0,
    seed: int = 0,
) -> Data:
    """Sample a CSBM graph (see module docstring).

    Returns:
        ``Data`` with ``x`` [n, F] float32, undirected ``edge_index`` [2, E] (both
        directions), ``y`` [n] long and ``num_classes``. Nodes are ordered by class.
    """
    import torch  # here: the catalog imports this module for its options only
    from torch_geometric.data import Data
    from torch_geometric.utils import to_undirected

    if num_classes < 2 or num_nodes < 2 * num_classes:
        raise ConfigError("synthetic: need num-classes >= 2 and num-nodes >= 2 * num-classes.")
    if not 0.0 <= homophily <= 1.0 or not 0.0 <= imbalance < 1.0:
        raise ConfigError("synthetic: homophily must be in [0, 1] and imbalance in [0, 1).")
    if num_features < 1 or avg_degree <= 0 or feature_noise < 0:
        raise ConfigError("synthetic: need num-features >= 1, avg-degree > 0, feature-noise >= 0.")
    rng = np.random.default_rng(seed)
    sizes = class_sizes(num_nodes, num_classes, imbalance)
    if sizes[-1] < 2:
        raise ConfigError("synthetic: imbalance too strong, the smallest class has < 2 nodes.")
    start = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    y = np.repeat(np.arange(num_classes), sizes)

    means = rng.standard_normal((num_classes, num_features))
    x = means[y] + feature_noise * rng.standard_normal((num_nodes, num_features))

    num_edges = int(round(num_nodes * avg_degree / 2))
    src = rng.integers(0, num_nodes, num_edges)
    c = y[src]
    intra = rng.random(num_edges) < homophily
    r = rng.random(num_edges)
    dst_in = start[c] + (r * sizes[c]).astype(np.int64)
    other = (r * (num_nodes - sizes[c])).astype(np.int64)  # index among other classes
    dst_out = np.where(other < start[c], other, other + sizes[c])
    dst = np.where(intra, dst_in, dst_out)
    keep = src != dst
    edge_index = torch.from_numpy(np.stack([src[keep], dst[keep]]))
    edge_index = to_undirected(edge_index, num_nodes=num_nodes)  # also coalesces
    return Data(
        x=torch.from_numpy(x.astype(np.float32)),
        edge_index=edge_index,
        y=torch.from_numpy(y),
        num_classes=num_classes,
    )
