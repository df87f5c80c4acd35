r"""Edge-flip noise (FedHERO §4.8, spec §1.2 item 4 and A20), numpy only.

Every undirected edge of a client's graph is, independently with probability :math:`p`,
deleted and replaced by a uniformly random *non-edge* of that graph (a pair
:math:`\{u, v\}`, :math:`u \ne v`, not joined before; no pair is added twice), so the edge
count is kept:

.. math::

   E' = \{e \in E : b_e = 0\} \cup R, \qquad b_e \sim \mathrm{Bernoulli}(p),\quad
   R \subset \tbinom{V}{2} \setminus E \text{ uniform},\ |R| = \textstyle\sum_e b_e.

The loader applies it after the partition (it is not cached), drawing from
``default_rng([split_seed, partition_id, EDGE_FLIP_STREAM])``: the same noisy graph for every
run seed and method, and a stream apart from the split's own draws.
"""

from __future__ import annotations

import numpy as np

from fgl_flower.errors import ConfigError

#: Third word of the edge flip's seed, keeping its draws apart from the split's.
EDGE_FLIP_STREAM = 0xF11B


def flip_edges(edges: np.ndarray, num_nodes: int, p: float, rng: np.random.Generator) -> np.ndarray:
    """``[2, E]`` undirected edges (``u < v``, unique) with each replaced, with probability
    ``p``, by a uniformly random non-edge; returned sorted, ``u < v``."""
    flipped = rng.random(edges.shape[1]) < p
    added = random_non_edges(edges, num_nodes, int(flipped.sum()), rng)
    out = np.concatenate([edges[:, ~flipped], added], axis=1)
    return out[:, np.lexsort((out[1], out[0]))]


def random_non_edges(
    edges: np.ndarray, num_nodes: int, count: int, rng: np.random.Generator
) -> np.ndarray:
    """``[2, count]`` distinct pairs ``u < v`` drawn uniformly from the pairs not in ``edges``.

    Rejection sampling: ordered pairs are drawn uniformly, self-pairs, edges and repeats are
    dropped, and the first ``count`` survivors (in draw order) are kept.
    """
    n = int(num_nodes)
    free = n * (n - 1) // 2 - edges.shape[1]
    if count > free:
        raise ConfigError(
            f"edge-flip: a client graph of {n} nodes has only {free} non-edges for "
            f"{count} flipped edges; lower edge-flip."
        )
    existing = np.sort(edges[0].astype(np.int64) * n + edges[1])
    chosen = np.empty(0, dtype=np.int64)
    while chosen.size < count:
        u, v = rng.integers(n, size=(2, 2 * (count - chosen.size) + 64))
        keys = np.minimum(u, v) * n + np.maximum(u, v)
        keys = keys[(u != v) & ~np.isin(keys, existing)]
        keys = np.concatenate([chosen, keys])
        _, first = np.unique(keys, return_index=True)
        chosen = keys[np.sort(first)][:count]
    return np.stack([chosen // n, chosen % n])
