"""Invariants of every node partitioner on the synthetic graph."""

import numpy as np
import pytest

from fgl_flower.datasets import PARTITIONERS, DataConfig, load_client_data, partition_stats
from fgl_flower.datasets.partition import PartitionInput
from fgl_flower.errors import ConfigError

K = 3
# Options keeping louvain-plus valid on 1000 nodes (1000 // 20 - 5 > 0).
NODE_CASES = {
    "louvain-topk": (),
    "louvain": (),
    "louvain-plus": (("num-communities", 20), ("part-delta", 5)),
    "metis-plus": (("num-communities", 20),),
    "metis": (),
    "random": (),
    "dirichlet": (("alpha", 0.5),),
}
SEEDED = {"louvain-plus", "metis-plus", "random", "dirichlet"}  # output visibly seed-dependent


def _cfg(name, seed=0, k=K):
    return DataConfig("synthetic", name, k, partition_seed=seed, options=NODE_CASES[name])


def _global_ids(cfg):
    return [load_client_data(cfg, k).data.global_id.numpy() for k in range(cfg.num_clients)]


def test_every_node_partitioner_is_covered():
    # files: test_files_partitioner; louvain-merge (the data give K): test_louvain_merge.py;
    # assign (the user's ids): test_own_data.py
    apart = {"files", "louvain-merge", "assign"}
    node = {n for n, p in PARTITIONERS.items() if "node" in p.tasks} - apart
    assert node == set(NODE_CASES)


@pytest.mark.parametrize("name", sorted(NODE_CASES))
def test_node_partitioner_invariants(name):
    cfg = _cfg(name)
    ids = _global_ids(cfg)
    assert len(ids) == K and all(i.size > 0 for i in ids)
    allids = np.concatenate(ids)
    assert np.unique(allids).size == allids.size  # every kept node in exactly one client
    if name != "louvain-topk":
        assert allids.size == 1000
    for k in range(K):
        d = load_client_data(cfg, k).data
        assert d.edge_index.max() < d.num_nodes  # local ids only: no cross-client edges
        assert d.train_mask.sum() + d.val_mask.sum() + d.test_mask.sum() == d.num_nodes
    again = _global_ids(_cfg(name))
    assert all(np.array_equal(a, b) for a, b in zip(ids, again))
    if name in SEEDED:
        other = _global_ids(_cfg(name, seed=1))
        assert not all(np.array_equal(a, b) for a, b in zip(ids, other))


def test_louvain_greedy_balances():
    sizes = [s["nodes"] for s in partition_stats(_cfg("louvain", k=2))]
    assert sum(sizes) == 1000


def test_dirichlet_label_skew():
    stats = partition_stats(DataConfig("synthetic", "dirichlet", 4, options=(("alpha", 0.1),)))
    shares = [max(s["class_counts"]) / s["nodes"] for s in stats]
    assert np.mean(shares) > 0.5  # balanced classes would give 0.25


def test_more_clients_than_communities():
    with pytest.raises(ConfigError, match="communities"):
        load_client_data(DataConfig("synthetic", "louvain-topk", 50), 0)
    with pytest.raises(ConfigError, match="communities"):
        load_client_data(DataConfig("synthetic", "louvain", 50), 0)


def test_more_clients_than_nodes():
    cfg = DataConfig("synthetic", "random", 200, options=(("num-nodes", 100),))
    with pytest.raises(ConfigError, match="exceeds"):
        load_client_data(cfg, 0)


def test_files_partitioner(tmp_path):
    np.savetxt(tmp_path / "synthetic_00.txt", np.arange(0, 10, dtype=float))
    np.savetxt(tmp_path / "synthetic_01.txt", np.arange(500, 530, dtype=float))
    opts = (("dir", str(tmp_path)),)
    cfg = DataConfig("synthetic", "files", 2, options=opts)
    ids = _global_ids(cfg)
    assert ids[0].tolist() == list(range(10)) and ids[1].tolist() == list(range(500, 530))
    with pytest.raises(ConfigError, match="2 files"):
        load_client_data(DataConfig("synthetic", "files", 3, options=opts), 0)
    with pytest.raises(ConfigError, match="needs option dir"):
        load_client_data(DataConfig("synthetic", "files", 2), 0)


def test_partition_input_graph_is_undirected_simple():
    inp = PartitionInput("x", np.zeros(3, int), np.array([[0, 1], [1, 2]]))
    assert inp.graph.number_of_edges() == 2 and inp.num_classes == 1


def test_louvain_plus_owners_take_chunks_breadth_first():
    # Two disjoint 20-cliques are two Louvain communities; chunk = 40 // 2 - 15 = 5. The
    # reference queues each community's remainder at the end of the group list, so the
    # chunks come A1 B1 A2 B2 ... and every owner gets half of each clique.
    from itertools import combinations

    from fgl_flower.datasets.partition.community import louvain_owners

    edges = [(a + off, b + off) for off in (0, 20) for a, b in combinations(range(20), 2)]
    inp = PartitionInput("cliques", np.zeros(40, dtype=np.int64), np.array(edges).T)
    owners = louvain_owners(inp, num_owners=2, delta=15, seed=0)
    assert [o.tolist() for o in owners] == [
        list(range(0, 10)) + list(range(20, 30)),
        list(range(10, 20)) + list(range(30, 40)),
    ]
