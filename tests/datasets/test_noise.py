"""Edge-flip noise: each edge replaced by a random non-edge with probability p."""

import numpy as np
import torch

from fgl_flower.datasets import DataConfig, load_client_data
from fgl_flower.datasets.edges import undirected_edges
from fgl_flower.datasets.noise import flip_edges


def _keys(edges: np.ndarray, n: int) -> set[int]:
    return set((edges[0] * n + edges[1]).tolist())


def _random_graph(n: int = 500, m: int = 4000, seed: int = 0) -> np.ndarray:
    u, v = np.random.default_rng(seed).integers(n, size=(2, m))
    return undirected_edges(torch.from_numpy(np.stack([u, v])), n)


def test_flip_keeps_the_count_and_adds_only_non_edges():
    n, edges = 500, _random_graph()
    out = flip_edges(edges, n, 0.3, np.random.default_rng(1))
    assert out.shape == edges.shape and (out[0] < out[1]).all()
    assert len(_keys(out, n)) == edges.shape[1]  # no pair twice
    kept = _keys(edges, n) & _keys(out, n)
    changed = 1 - len(kept) / edges.shape[1]
    assert abs(changed - 0.3) < 0.03  # about p of the edges were replaced
    assert np.array_equal(out, flip_edges(edges, n, 0.3, np.random.default_rng(1)))
    assert np.array_equal(flip_edges(edges, n, 0.0, np.random.default_rng(1)), edges)


def _edges(cfg: DataConfig, k: int) -> torch.Tensor:
    return load_client_data(cfg, k).data.edge_index


def test_client_edges_are_flipped_at_load_time():
    base = DataConfig("synthetic", "metis", 3, split_seed=4)
    noisy = DataConfig("synthetic", "metis", 3, split_seed=4, edge_flip=0.2)
    from torch_geometric.utils import is_undirected

    clean, flipped = [_edges(base, k) for k in range(3)], [_edges(noisy, k) for k in range(3)]
    for k in range(3):
        n = load_client_data(base, k).data.num_nodes
        assert is_undirected(flipped[k], num_nodes=n) and flipped[k].size(1) == clean[k].size(1)
        assert (flipped[k][0] != flipped[k][1]).all()
        a, b = undirected_edges(clean[k], n), undirected_edges(flipped[k], n)
        assert 0.1 < 1 - len(_keys(a, n) & _keys(b, n)) / a.shape[1] < 0.3
    from fgl_flower.datasets.build import client_part as _client_part

    _client_part.cache_clear()
    load_client_data.cache_clear()
    assert torch.equal(_edges(noisy, 0), flipped[0])  # deterministic, from split-seed and client
    assert torch.equal(_edges(base, 0), clean[0])  # the cached partition stays clean
    other_fold = DataConfig(
        "synthetic", "metis", 3, split_seed=4, edge_flip=0.2, split_mode="five-group", split_fold=3
    )
    assert torch.equal(_edges(other_fold, 1), flipped[1])  # the same noisy graph for every fold
    other_seed = DataConfig("synthetic", "metis", 3, split_seed=5, edge_flip=0.2)
    assert not torch.equal(_edges(other_seed, 1), flipped[1])
