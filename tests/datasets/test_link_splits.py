"""Link-prediction splits: disjoint parts, a message graph without held-out edges, exact
negatives, seeds, the client-size errors, and a real Cora client."""

import numpy as np
import pytest
import torch

from fgl_flower.datasets.link_splits import LinkSplit, edge_keys, sample_negatives, split_edges
from fgl_flower.errors import ConfigError


def _keys(edges: torch.Tensor, n: int) -> np.ndarray:
    """Keys u * n + v of the columns, as they are (no canonicalisation)."""
    return (edges[0] * n + edges[1]).numpy()


def _random_graph(n: int, m: int, seed: int) -> torch.Tensor:
    """Both directions of ``m`` random pairs (repeats and self-loops included on purpose)."""
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, m), generator=g)
    return torch.cat([ei, ei.flip(0)], dim=1)


def check_split(s: LinkSplit, edge_index: torch.Tensor, ratios=(0.8, 0.1, 0.1), r=1) -> None:
    n = s.num_nodes
    graph = set()
    for u, v in edge_index.T.tolist():
        if u != v:
            graph.add((min(u, v), max(u, v)))
    pos = {name: getattr(s, name) for name in ("train_pos", "val_pos", "test_pos")}
    # each edge once, u < v, and the three parts cover the graph's edges exactly once
    seen = []
    for edges in pos.values():
        assert edges.dtype == torch.long and edges.shape[0] == 2
        assert bool((edges[0] < edges[1]).all())
        seen += [tuple(e) for e in edges.T.tolist()]
    assert len(seen) == len(set(seen)) == len(graph) and set(seen) == graph
    m = len(graph)
    a, b = int(ratios[0] * m), int((ratios[0] + ratios[1]) * m)
    assert [p.shape[1] for p in pos.values()] == [a, b - a, m - b]
    # the message graph: the training edges in both directions, nothing else
    msg = set(map(tuple, s.message_edges.T.tolist()))
    train = set(map(tuple, s.train_pos.T.tolist()))
    assert s.message_edges.shape[1] == 2 * len(train) == len(msg)
    assert msg == train | {(v, u) for u, v in train}
    for held in (s.val_pos, s.test_pos):
        for u, v in held.T.tolist():
            assert (u, v) not in msg and (v, u) not in msg
    # negatives: non-edges, u < v, no self-loop, no repeat, val and test disjoint, r per edge
    negs = []
    for neg, positives in ((s.val_neg, s.val_pos), (s.test_neg, s.test_pos)):
        assert neg.shape == (2, r * positives.shape[1])
        assert bool((neg[0] < neg[1]).all()) and bool((neg < n).all())
        negs += [tuple(e) for e in neg.T.tolist()]
    assert len(negs) == len(set(negs))
    assert not set(negs) & graph


def test_split_on_a_random_graph():
    ei = _random_graph(200, 1500, seed=0)
    s = split_edges(ei, 200, seed=[3, 1])
    check_split(s, ei)


@pytest.mark.parametrize(("ratios", "r"), [((0.6, 0.2, 0.2), 3), ((0.85, 0.05, 0.1), 0)])
def test_other_ratios_and_negative_ratios(ratios, r):
    ei = _random_graph(120, 700, seed=1)
    check_split(split_edges(ei, 120, ratios=ratios, seed=5, neg_ratio=r), ei, ratios, r)


def test_zero_validation_ratio_gives_empty_validation():
    ei = _random_graph(60, 200, seed=2)
    s = split_edges(ei, 60, ratios=(0.9, 0.0, 0.1), seed=0)
    assert s.val_pos.shape == s.val_neg.shape == (2, 0)
    check_split(s, ei, (0.9, 0.0, 0.1))


def test_large_sparse_client_uses_rejection_sampling():
    n = 50_000  # 1.25e9 pairs: the negatives are drawn, not enumerated
    ei = _random_graph(n, 100_000, seed=3)
    s = split_edges(ei, n, seed=[0, 7], neg_ratio=2)
    all_keys = edge_keys(ei, n)
    for neg in (s.val_neg, s.test_neg):
        assert not np.isin(_keys(neg, n), all_keys).any()
    negs = np.concatenate([_keys(s.val_neg, n), _keys(s.test_neg, n)])
    assert np.unique(negs).size == negs.size == 2 * (s.val_pos.shape[1] + s.test_pos.shape[1])
    msg = _keys(s.message_edges, n)
    assert not np.isin(_keys(s.val_pos, n), msg).any()
    assert not np.isin(_keys(s.test_pos.flip(0), n), msg).any()


def test_depends_on_the_edge_set_not_its_storage():
    ei = _random_graph(80, 300, seed=4)
    one_way = ei[:, : ei.shape[1] // 2]
    shuffled = ei[:, torch.randperm(ei.shape[1], generator=torch.Generator().manual_seed(0))]
    a, b, c = (split_edges(e, 80, seed=[1, 2]) for e in (ei, one_way, shuffled))
    for name in ("train_pos", "val_pos", "test_pos", "val_neg", "test_neg", "message_edges"):
        assert torch.equal(getattr(a, name), getattr(b, name))
        assert torch.equal(getattr(a, name), getattr(c, name))


def test_seeds():
    ei = _random_graph(100, 600, seed=5)
    a, b = split_edges(ei, 100, seed=[0, 1]), split_edges(ei, 100, seed=[0, 1])
    c = split_edges(ei, 100, seed=[0, 2])
    for name in ("train_pos", "val_pos", "test_pos", "val_neg", "test_neg", "message_edges"):
        assert torch.equal(getattr(a, name), getattr(b, name))
    assert not torch.equal(a.test_pos, c.test_pos)
    assert not torch.equal(a.test_neg, c.test_neg)


def test_to_device_moves_every_tensor():
    s = split_edges(_random_graph(30, 80, seed=6), 30, seed=0).to("cpu")
    assert s.num_nodes == 30 and s.message_edges.device.type == "cpu"


def test_too_few_edges_for_the_splits():
    chain = torch.tensor([list(range(9)), list(range(1, 10))])  # 9 edges: 7 / 1 / 1
    s = split_edges(chain, 10)
    assert (s.val_pos.shape[1], s.test_pos.shape[1]) == (1, 1)
    # 5 edges: int(0.8 * 5) = int(0.9 * 5) = 4, no validation edge; 6 is the least (4 / 1 / 1)
    with pytest.raises(
        ConfigError,
        match=r"5 undirected edges \(10 nodes\) leave the validation "
        r"split empty .* needs at least 6 edges",
    ):
        split_edges(chain[:, :5], 10)
    with pytest.raises(ConfigError, match="leave the test split empty"):
        split_edges(torch.tensor([[3], [3]]), 10)  # a self-loop is no edge
    with pytest.raises(ConfigError, match="leave the train split empty"):
        split_edges(chain[:, :1], 10, ratios=(0.4, 0.0, 0.6))
    assert split_edges(chain[:, :2], 10, ratios=(0.5, 0.0, 0.5)).train_pos.shape == (2, 1)


def test_too_dense_for_the_negatives():
    n = 12
    full = torch.combinations(torch.arange(n)).T  # 66 edges, no non-edge
    with pytest.raises(ConfigError, match=r"too dense or small .* 0 non-edges, .* lower neg_ratio"):
        split_edges(full, n)
    assert split_edges(full, n, neg_ratio=0).test_neg.shape == (2, 0)
    sparse = full[:, :46]  # 20 non-edges; 36 train, 5 val, 5 test edges
    check_split(split_edges(sparse, n, neg_ratio=2, seed=1), sparse, r=2)  # 20 of 20
    with pytest.raises(ConfigError, match="30 validation and test negatives at neg_ratio=3"):
        split_edges(sparse, n, neg_ratio=3)


def test_bad_arguments():
    ei = _random_graph(10, 30, seed=7)
    with pytest.raises(ConfigError, match="sum to 1"):
        split_edges(ei, 10, ratios=(0.5, 0.1, 0.1))
    with pytest.raises(ConfigError, match="outside the client's 5 nodes"):
        split_edges(ei, 5)
    with pytest.raises(ConfigError, match="neg_ratio must be a non-negative integer"):
        split_edges(ei, 10, neg_ratio=0.5)


@pytest.mark.parametrize(
    "make", [lambda s: torch.Generator().manual_seed(s), np.random.default_rng]
)
def test_sample_negatives_exact_unique_and_seeded(make):
    n = 40
    ei = _random_graph(n, 300, seed=8)
    excl = edge_keys(ei, n)
    g = make(0)
    a, b = sample_negatives(n, excl, 200, g), sample_negatives(n, excl, 200, g)
    for neg in (a, b):
        assert neg.shape == (2, 200) and neg.dtype == torch.long
        assert bool((neg[0] < neg[1]).all()) and int(neg.max()) < n
        keys = _keys(neg, n)
        assert np.unique(keys).size == 200 and not np.isin(keys, excl).any()
    assert not torch.equal(a, b)  # the generator advanced: a new draw each epoch
    assert torch.equal(a, sample_negatives(n, excl, 200, make(0)))
    assert not torch.equal(a, sample_negatives(n, excl, 200, make(1)))


def test_sample_negatives_takes_every_pair_left_and_no_more():
    n = 30
    excl = edge_keys(_random_graph(n, 150, seed=9), n)
    left = n * (n - 1) // 2 - excl.size
    every = sample_negatives(n, torch.from_numpy(excl), left, np.random.default_rng(0))
    u, v = np.triu_indices(n, k=1)
    expected = np.setdiff1d(u * n + v, excl)
    assert np.array_equal(np.sort(_keys(every, n)), expected)
    with pytest.raises(ConfigError, match=f"only {left} pairs"):
        sample_negatives(n, excl, left + 1, np.random.default_rng(0))


def test_sample_negatives_is_uniform():
    # 6 nodes, 2 excluded pairs: 13 candidates, each drawn 3/13 of the time with 3 per draw
    n, excl = 6, np.array([0 * 6 + 1, 2 * 6 + 5])
    counts: dict[int, int] = {}
    g = torch.Generator().manual_seed(0)
    for _ in range(2000):
        for k in _keys(sample_negatives(n, excl, 3, g), n):
            counts[int(k)] = counts.get(int(k), 0) + 1
    assert len(counts) == 13
    freq = np.array(list(counts.values())) / 2000
    assert np.abs(freq - 3 / 13).max() < 0.04


def test_sample_negatives_in_a_large_sparse_graph():
    n = 100_000
    ei = _random_graph(n, 100_000, seed=10)
    excl = edge_keys(ei, n)
    neg = sample_negatives(n, excl, 100_000, torch.Generator().manual_seed(0))
    keys = _keys(neg, n)
    assert np.unique(keys).size == 100_000 and not np.isin(keys, excl).any()


def test_a_real_louvain_client(data_root):
    from fgl_flower.datasets import DataConfig, load_client_data

    client = load_client_data(DataConfig("Cora", "louvain", 10, data_root=str(data_root)), 0)
    ei, n = client.data.edge_index, client.data.num_nodes
    s = split_edges(ei, n, seed=[0, 0])
    check_split(s, ei)
    assert s.train_pos.shape[1] > 100 and s.test_pos.shape[1] > 10
    train_keys = edge_keys(s.train_pos, n)
    neg = sample_negatives(n, train_keys, s.train_pos.shape[1], torch.Generator().manual_seed(0))
    assert not np.isin(_keys(neg, n), train_keys).any()
