"""syn-cora: H2GCN's graphs as node datasets, and the ten-client node dataset group."""

import numpy as np
import pytest
import torch

from fgl_flower.datasets import (
    DATASET_GROUPS,
    DataConfig,
    dataset_status,
    load_client_data,
    load_dataset,
    natural_num_clients,
    partition_stats,
)
from fgl_flower.datasets.edges import undirected_edges
from fgl_flower.datasets.homophily import edge_homophily
from fgl_flower.datasets.syncora import HOMOPHILY_LEVELS, REPLICAS
from fgl_flower.errors import CorruptDataError, DataUnavailableError


@pytest.fixture(scope="module")
def syn_root(data_root):
    if not (data_root / "syn-cora" / "raw").is_dir():
        pytest.skip(f"no syn-cora files under {data_root}")
    return data_root


def test_every_graph_has_the_published_statistics(syn_root):
    names = [f"syn-cora-h{h}-r{r}" for h in HOMOPHILY_LEVELS for r in REPLICAS]
    assert len(names) == 36
    for name in names:
        if not dataset_status(name, syn_root)[0]:
            continue
        data = load_dataset(name, syn_root)
        edges = undirected_edges(data.edge_index, data.num_nodes)
        assert data.num_nodes == 1490 and data.num_classes == 5 and data.x.shape == (1490, 1433)
        assert data.x.dtype.is_floating_point and not data.x.is_sparse
        assert np.bincount(data.y.numpy()).tolist() == [298] * 5
        assert data.edge_index.size(1) == 2 * edges.shape[1]  # both directions, no self-loops
        assert 2965 <= edges.shape[1] <= 2968, name
        target = float(name.split("-h")[1].split("-")[0])
        # within 0.02 of the target, except h0.80-r3 (0.777) and h0.80-r2 (0.77999)
        assert abs(edge_homophily(edges, data.y.numpy()) - target) <= 0.025, name


def test_the_group_has_ten_clients_of_rising_homophily(syn_root):
    group = DATASET_GROUPS.get("syn-cora")
    assert group.task == "node" and len(group.members) == 10
    cfg = DataConfig(
        "syn-cora", "per-dataset", 0, data_root=str(syn_root), split_mode="five-group", split_fold=1
    )
    assert natural_num_clients(cfg) == 10
    stats = partition_stats(cfg)
    assert [s["nodes"] for s in stats] == [1490] * 10
    homophily = [s["edge_homophily"] for s in stats]
    assert all(abs(h - k / 10) <= 0.02 for k, h in enumerate(homophily))
    c = load_client_data(
        DataConfig(
            "syn-cora",
            "per-dataset",
            10,
            data_root=str(syn_root),
            split_mode="five-group",
            split_fold=1,
        ),
        9,
    )
    assert c.num_features == 1433 and c.num_classes == 5 and c.data.num_nodes == 1490
    assert c.data.global_id.tolist() == list(range(1490))
    assert int(c.data.train_mask.sum()) == 894 and int(c.data.test_mask.sum()) == 298


def test_five_groups_follow_the_shared_cora_nodes(syn_root):
    """The ten graphs are the same 1,490 Cora nodes reordered: a node is in the same group in
    every graph, so no client tests on a node that another client trains on (up to Cora nodes
    with identical features and label)."""

    def rows(c, mask):
        x, y = c.data.x.to_dense()[mask].numpy(), c.data.y[mask].numpy()
        return sorted((int(label), row.tobytes()) for row, label in zip(x, y))

    cfg = DataConfig(
        "syn-cora",
        "per-dataset",
        10,
        data_root=str(syn_root),
        split_mode="five-group",
        split_fold=2,
    )
    first, last = load_client_data(cfg, 0), load_client_data(cfg, 9)
    assert not torch.equal(first.data.x.to_dense(), last.data.x.to_dense())  # reordered
    for mask in ("train_mask", "val_mask", "test_mask"):
        assert rows(first, getattr(first.data, mask)) == rows(last, getattr(last.data, mask))
    every = rows(first, torch.ones(first.data.num_nodes, dtype=torch.bool))
    twins = {r for r, nxt in zip(every, every[1:]) if r == nxt}  # a few Cora nodes are identical
    shared = set(rows(first, first.data.test_mask)) & set(rows(last, last.data.train_mask))
    assert len(twins) < 10 and shared <= twins


def test_missing_and_corrupt_files(tmp_path):
    with pytest.raises(
        DataUnavailableError,
        match=r"(?s)'syn-cora-h0.50-r1'.*no file .*h0.50-r1.npz.*"
        r"FGL_DATA_ROOT.*cannot be downloaded",
    ):
        load_dataset("syn-cora-h0.50-r1", tmp_path)
    with pytest.raises(DataUnavailableError, match="syn-cora-h0.30-r1"):
        load_client_data(DataConfig("syn-cora", "per-dataset", 10, data_root=str(tmp_path)), 3)
    assert dataset_status("syn-cora-h0.50-r1", tmp_path) == (False, tmp_path / "syn-cora" / "raw")
    (tmp_path / "syn-cora" / "raw").mkdir(parents=True)
    (tmp_path / "syn-cora" / "raw" / "h0.50-r1.npz").write_bytes(b"not a zip")
    with pytest.raises(CorruptDataError, match="restore the file"):
        load_dataset("syn-cora-h0.50-r1", tmp_path)
