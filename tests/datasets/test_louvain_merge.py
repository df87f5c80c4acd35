"""``louvain-merge``: large Louvain communities are clients, the data give their number."""

from itertools import combinations

import numpy as np
import pytest

from fgl_flower.datasets import (
    DataConfig,
    load_client_data,
    natural_num_clients,
    partition_stats,
    with_natural_clients,
)
from fgl_flower.datasets.partition import PARTITIONERS, PartitionInput
from fgl_flower.errors import ConfigError

OPTS = {"resolution": 1.0, "min-size": 50}


def _cliques(sizes: list[int], isolated: int = 0) -> PartitionInput:
    """Disjoint cliques of ``sizes`` (each one Louvain community) plus isolated nodes."""
    edges, start = [], 0
    for size in sizes:
        edges += [(start + a, start + b) for a, b in combinations(range(size), 2)]
        start += size
    n = start + isolated
    return PartitionInput("cliques", np.zeros(n, dtype=np.int64), np.array(edges).T)


def _split(inp: PartitionInput, seed: int = 0, **opts) -> list[np.ndarray]:
    return PARTITIONERS.get("louvain-merge")().natural_split(inp, seed, {**OPTS, **opts})


def test_large_communities_are_clients_and_small_ones_are_merged():
    inp = _cliques([60, 80, 55, 10, 12, 20, 5], isolated=3)
    parts = _split(inp)
    assert len(parts) == 3  # the cliques of 80, 60, 55 nodes
    allids = np.concatenate(parts)
    assert np.array_equal(np.sort(allids), np.arange(inp.num_items))  # each node once
    assert all(p.size >= 50 for p in parts)
    cores = [set(range(60, 140)), set(range(60)), set(range(140, 195))]  # largest first
    assert all(core <= set(p.tolist()) for core, p in zip(cores, parts))
    for small in (range(195, 205), range(205, 217), range(217, 237), range(237, 242)):
        owners = {k for k, p in enumerate(parts) for i in small if i in set(p.tolist())}
        assert len(owners) == 1  # a small community joins one client whole
    assert all(np.array_equal(a, b) for a, b in zip(parts, _split(inp)))  # deterministic


def test_the_merge_is_seeded_and_min_size_sets_the_count():
    inp = _cliques([60, 80, 55] + [6] * 12)
    draws = {tuple(p.size for p in _split(inp, seed)) for seed in range(6)}
    assert len(draws) > 1  # which large community takes a small one depends on the seed
    assert len(_split(inp, **{"min-size": 56})) == 2
    with pytest.raises(
        ConfigError,
        match=r"no Louvain community of 'cliques' has >= 100 nodes \(the "
        r"largest has 80\)",
    ):
        _split(inp, **{"min-size": 100})


def test_explicit_count_must_match():
    part = PARTITIONERS.get("louvain-merge")()
    inp = _cliques([60, 80, 55])
    assert len(part.split(inp, 0, 0, OPTS)) == len(part.split(inp, 3, 0, OPTS)) == 3
    with pytest.raises(
        ConfigError, match="louvain-merge of 'cliques' gives 3 clients .*set num-clients=3 or 0"
    ):
        part.split(inp, 4, 0, OPTS)


def test_num_clients_zero_is_resolved_from_the_data():
    cfg = DataConfig("synthetic", "louvain-merge", 0)
    count = natural_num_clients(cfg)
    assert count is not None and count >= 2
    assert with_natural_clients(cfg).num_clients == count
    stats = partition_stats(cfg)  # resolves 0 itself
    assert len(stats) == count and sum(s["nodes"] for s in stats) == 1000
    assert all(s["nodes"] >= 50 for s in stats)
    with pytest.raises(ConfigError, match="must be resolved before loading a client"):
        load_client_data(cfg, 0)
    with pytest.raises(ConfigError, match=f"gives {count} clients .*set num-clients={count} or 0"):
        load_client_data(DataConfig("synthetic", "louvain-merge", count + 1), 0)
    assert natural_num_clients(DataConfig("synthetic", "metis", 3)) is None
    assert natural_num_clients(DataConfig("tu-single", "per-dataset", 0)) == 7


def test_chameleon_clients(data_root):
    opts = (("undirected", True),)
    cfg = with_natural_clients(
        DataConfig("chameleon", "louvain-merge", 0, data_root=str(data_root), options=opts)
    )
    ids = [load_client_data(cfg, k).data.global_id.numpy() for k in range(cfg.num_clients)]
    allids = np.concatenate(ids)
    assert np.array_equal(np.sort(allids), np.arange(2277))
    assert all(i.size >= 50 for i in ids)
    from fgl_flower.datasets import load_dataset
    from fgl_flower.datasets.edges import undirected_edges
    from fgl_flower.datasets.partition.community import louvain

    data = load_dataset("chameleon", data_root, {"undirected": True})
    comms = louvain(
        PartitionInput("chameleon", data.y.numpy(), undirected_edges(data.edge_index, 2277)), 1.0, 0
    )
    assert cfg.num_clients == sum(c.size >= 50 for c in comms)  # spec A12: 9
