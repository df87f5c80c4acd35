r"""Homophily of a labelled graph (numpy only).

Both measures read the undirected simple graph: ``edges`` is ``[2, E]`` with ``u < v``,
each pair once, self-loops dropped. With labels :math:`y` and neighbours :math:`N(v)`:

.. math::

   h_\mathrm{edge} = \frac{|\{\{u, v\} \in E : y_u = y_v\}|}{|E|},
   \qquad
   h_\mathrm{node} = \frac{1}{|V_+|} \sum_{v \in V_+}
       \frac{|\{u \in N(v) : y_u = y_v\}|}{|N(v)|},

where :math:`V_+` are the nodes with at least one neighbour: a node without neighbours has no
share of same-label neighbours, so it is left out (rather than counted as 0 or 1). On the
undirected geom-gcn graphs this gives FedHERO's "Origin" row of Table 7 (node homophily
chameleon 0.247, squirrel 0.217, Actor 0.220; spec §5.2), which have no isolated nodes.
"""

from __future__ import annotations

import numpy as np


def edge_homophily(edges: np.ndarray, y: np.ndarray) -> float:
    """Share of undirected edges joining two nodes of the same label (NaN without edges)."""
    same = y[edges[0]] == y[edges[1]]
    return float(same.mean()) if same.size else float("nan")


def node_homophily(edges: np.ndarray, y: np.ndarray) -> float:
    """Mean over nodes with neighbours of their share of same-label neighbours (NaN if none)."""
    n = y.shape[0]
    src, dst = np.concatenate([edges[0], edges[1]]), np.concatenate([edges[1], edges[0]])
    degree = np.bincount(src, minlength=n)
    same = np.bincount(src, weights=(y[src] == y[dst]).astype(np.float64), minlength=n)
    has = degree > 0
    return float((same[has] / degree[has]).mean()) if has.any() else float("nan")
