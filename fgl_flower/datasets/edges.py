"""Edge lists of one graph: the undirected simple edges, what a partitioner and the
statistics see."""

from __future__ import annotations

import numpy as np
import torch


def undirected_edges(edge_index: torch.Tensor, num_nodes: int) -> np.ndarray:
    """``[2, E']`` unique undirected edges ``u < v`` (self-loops removed)."""
    ei = edge_index.numpy()
    u, v = np.minimum(ei[0], ei[1]), np.maximum(ei[0], ei[1])
    keys = np.unique(u[u != v].astype(np.int64) * num_nodes + v[u != v])
    return np.stack([keys // num_nodes, keys % num_nodes])
