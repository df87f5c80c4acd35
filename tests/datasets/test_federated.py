"""The federated data API: validation, caching, loading from files."""

import shutil
import stat

import numpy as np
import pytest
import torch

from fgl_flower.datasets import (
    DataConfig,
    GraphClientData,
    NodeClientData,
    dataset_status,
    level_of,
    load_client_data,
    load_dataset,
    partition_stats,
    resolve_data_root,
    validate_data_config,
)
from fgl_flower.datasets.cache import partition_dir
from fgl_flower.errors import ConfigError, DataUnavailableError, UnknownNameError


def test_task_of():
    assert (
        level_of("cora") == "node"
        and level_of("MUTAG") == "graph"
        and level_of("tu-multi") == "graph"
    )
    with pytest.raises(UnknownNameError, match="Did you mean 'Cora'"):
        level_of("Coraa")


@pytest.mark.parametrize(
    "cfg, match",
    [
        (DataConfig("synthetik", "random", 2), "Did you mean 'synthetic'"),
        (DataConfig("synthetic", "louvian", 2), "Did you mean 'louvain'"),
        (
            DataConfig("synthetic", "random", 0),
            "num-clients=0 asks for the partition's natural number",
        ),
        (DataConfig("synthetic", "random", -1), "num_clients must be an integer >= 1"),
        (
            DataConfig("synthetic", "random", 2, split_mode="five-group", split=(0.8, 0.1, 0.1)),
            "split=0.8,0.1,0.1 with split-mode=five-group",
        ),
        (
            DataConfig("synthetic", "random", 2, split_mode="five-group", split_fold=5),
            "split-fold=5",
        ),
        (DataConfig("synthetic", "random", 2, edge_flip=1.0), "edge-flip=1.0"),
        (DataConfig("synthetic", "random", 2, edge_flip=-0.1), "edge-flip=-0.1"),
        (DataConfig("MUTAG", "random", 2, split_mode="five-group"), "graph-classification"),
        (DataConfig("MUTAG", "random", 2, edge_flip=0.1), "graph-classification"),
        (DataConfig("syn-cora", "per-dataset", 9), "set num-clients=10 or 0"),
        (DataConfig("synthetic", "louvain-merge", 0, options=(("min-size", 0),)), "min-size >= 1"),
        (DataConfig("synthetic", "random", 2, split=(0.5, 0.5, 0.5)), "sum to 1"),
        (DataConfig("synthetic", "random", 2, split_mode="strat"), "Did you mean 'stratified'"),
        (DataConfig("synthetic", "random", 2, options=(("alpah", 1.0),)), "Unknown option 'alpah'"),
        (DataConfig("synthetic", "dirichlet", 2, options=(("alpha", "x"),)), "must be float"),
        (DataConfig("synthetic", "per-dataset", 2), "cannot split"),
        (DataConfig("MUTAG", "metis", 2), "cannot split 'MUTAG'"),
        (DataConfig("tu-single", "dirichlet", 7), "cannot split"),
        (DataConfig("tu-single", "per-dataset", 3), "7 datasets"),
        (DataConfig("synthetic", "files", 2, options=(("dir", "/nonexistent"),)), "does not exist"),
    ],
)
def test_validation_errors(cfg, match):
    with pytest.raises(ConfigError, match=match):
        validate_data_config(cfg)


def test_options_accept_case_and_underscores():
    validate_data_config(
        DataConfig("synthetic", "dirichlet", 2, options=(("Min_Size", "3"), ("num_nodes", 300)))
    )


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """A cache of this test's own (the suite's is shared by its workers), empty in memory too."""
    from fgl_flower.datasets.build import client_part as _client_part

    monkeypatch.setenv("FGL_CACHE_DIR", str(tmp_path / "cache"))
    _client_part.cache_clear()
    load_client_data.cache_clear()


def test_cache_hit_identical_and_on_disk(own_cache):
    cfg = DataConfig("synthetic", "metis", 4, split_mode="stratified", options=(("data-seed", 7),))
    a = load_client_data(cfg, 2)
    assert isinstance(a, NodeClientData) and a.num_classes == 4 and a.num_features == 32
    (folder,) = [f for f in partition_dir("x").parent.glob("synthetic-metis-4-*") if f.is_dir()]
    assert (folder / "node_ptr.npy").is_file() and not list(folder.glob("client_*.pt"))
    from fgl_flower.datasets.build import client_part as _client_part

    _client_part.cache_clear()  # force a read from disk
    load_client_data.cache_clear()
    b = load_client_data(cfg, 2)
    for key in ("x", "edge_index", "y", "global_id", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(a.data, key), getattr(b.data, key))


def test_split_seed_changes_masks_not_partition():
    base = DataConfig("synthetic", "random", 2)
    a, b = (
        load_client_data(base, 0),
        load_client_data(DataConfig("synthetic", "random", 2, split_seed=5), 0),
    )
    assert torch.equal(a.data.global_id, b.data.global_id)
    assert not torch.equal(a.data.train_mask, b.data.train_mask)
    assert a.num_local == a.data.num_nodes == b.num_local
    assert (a.num_train, b.num_train) == (
        int(a.data.train_mask.sum()),
        int(b.data.train_mask.sum()),
    )


def test_partition_stats_node():
    stats = partition_stats(DataConfig("synthetic", "louvain", 2))
    assert sum(s["nodes"] for s in stats) == 1000
    assert all(0.5 < s["edge_homophily"] <= 1.0 for s in stats)


def test_data_root_resolution(monkeypatch, tmp_path):
    monkeypatch.setenv("FGL_DATA_ROOT", str(tmp_path / "env"))
    assert resolve_data_root("/x/y") == resolve_data_root("/x/y/")
    assert resolve_data_root(None) == (tmp_path / "env").resolve()
    monkeypatch.delenv("FGL_DATA_ROOT")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert resolve_data_root(None) == tmp_path / "xdg" / "fgl-flower" / "data"


def test_missing_data_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("FGL_OFFLINE", "1")
    assert dataset_status("Cora", tmp_path) == (False, tmp_path / "Planetoid" / "Cora" / "raw")
    with pytest.raises(
        DataUnavailableError, match=str(tmp_path / "Planetoid" / "Cora" / "raw")
    ) as err:
        load_dataset("Cora", tmp_path)
    assert "FGL_DATA_ROOT" in str(err.value)
    with pytest.raises(DataUnavailableError, match="'MUTAG'"):
        load_client_data(DataConfig("MUTAG", "random", 2, data_root=str(tmp_path)), 0)


def test_download_failure_is_converted(tmp_path, monkeypatch):
    from torch_geometric.datasets import Planetoid

    def fail(self):
        raise OSError("no network")

    monkeypatch.setattr(Planetoid, "download", fail)
    with pytest.raises(DataUnavailableError, match="download failed: OSError: no network"):
        load_dataset("CiteSeer", tmp_path)


def test_read_only_data_root(data_root, tmp_path):
    root = tmp_path / "ro"
    shutil.copytree(data_root / "Planetoid" / "Cora" / "raw", root / "Planetoid" / "Cora" / "raw")
    for path in [*root.rglob("*"), root]:
        path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    before = sorted(str(p) for p in root.rglob("*"))
    try:
        data = load_dataset("Cora", root)
        assert data.num_nodes == 2708 and data.num_classes == 7
        assert sorted(str(p) for p in root.rglob("*")) == before  # nothing written
        assert dataset_status("cora", root) == (True, root / "Planetoid" / "Cora" / "raw")
    finally:
        for path in [root, *root.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)


def test_cora_client_features_sparse(data_root):
    cfg = DataConfig(
        "Cora",
        "louvain",
        5,
        data_root=str(data_root),
        split=(0.2, 0.4, 0.4),
        split_mode="stratified",
    )
    c = load_client_data(cfg, 0)
    assert c.data.x.is_sparse and c.num_features == 1433 and c.num_classes == 7
    assert sum(s["nodes"] for s in partition_stats(cfg)) == 2708


def test_mutag_dirichlet(data_root):
    cfg = DataConfig("MUTAG", "dirichlet", 3, data_root=str(data_root), options=(("min-size", 5),))
    clients = [load_client_data(cfg, k) for k in range(3)]
    assert all(isinstance(c, GraphClientData) and c.dataset == "MUTAG" for c in clients)
    assert sum(len(c.train) + len(c.val) + len(c.test) for c in clients) == 188
    assert sum(c.num_local for c in clients) == 188
    assert [c.num_train for c in clients] == [len(c.train) for c in clients]


def test_tu_single_group(data_root):
    cfg = DataConfig(
        "tu-single",
        "per-dataset",
        7,
        data_root=str(data_root),
        split=(0.8, 0.1, 0.1),
        split_mode="stratified",
        split_seed=123,
    )
    c0 = load_client_data(cfg, 0)
    assert c0.dataset == "MUTAG" and c0.num_features == 7 and c0.num_classes == 2
    assert (len(c0.train), len(c0.val), len(c0.test)) == (150, 19, 19)
    assert load_client_data(cfg, 4).dataset == "PTC_MR"


FEDSPRAY_PHYSICS = {  # file -> class counts (FedSpray rebuttal, spec §6.6)
    "Physics_00": [1, 40, 2794, 2, 53],
    "Physics_01": [59, 2802, 1415, 8, 158],
    "Physics_02": [56, 347, 449, 4, 2262],
    "Physics_03": [177, 87, 65, 2070, 55],
    "Physics_04": [4031, 72, 32, 43, 26],
    "Physics_06": [6, 11, 2790, 2, 32],
    "Physics_07": [3, 46, 1560, 5, 25],
    "Physics_08": [0, 27, 976, 2, 76],
    "Physics_09": [6, 96, 3057, 3, 71],
    "Physics_11": [6, 17, 2594, 8, 55],
    "Physics_12": [1225, 70, 44, 440, 41],
    "Physics_14": [23, 1153, 174, 7, 54],
}


@pytest.mark.slow
def test_physics_fedspray_files(data_root):
    part_dir = data_root.parent / "fedspray_partition"
    if not part_dir.is_dir():
        pytest.skip(f"no FedSpray partition files at {part_dir}")
    cfg = DataConfig(
        "Physics",
        "files",
        12,
        data_root=str(data_root),
        split=(0.4, 0.3, 0.3),
        options=(("dir", str(part_dir)),),
    )
    stats = partition_stats(cfg)
    files = sorted(p.stem for p in part_dir.glob("Physics_*.txt"))
    got = {f: s["class_counts"] for f, s in zip(files, stats)}
    assert got == FEDSPRAY_PHYSICS
    assert np.mean([s["edges"] for s in stats]) == pytest.approx(14790.2, abs=0.05)
    c = load_client_data(cfg, 0)
    assert c.data.x.is_sparse and c.num_features == 8415
    n = c.data.num_nodes
    assert int(c.data.train_mask.sum()) == int(0.4 * n)


def test_partitioner_version_invalidates_cache(own_cache, monkeypatch):
    cfg = DataConfig("synthetic", "metis", 2, options=(("data-seed", 7),))
    load_client_data(cfg, 0)
    from fgl_flower.datasets.build import client_part as _client_part
    from fgl_flower.datasets.partition.community import Metis

    before = {p.name for p in partition_dir("").iterdir()}
    monkeypatch.setattr(Metis, "version", Metis.version + 1)
    _client_part.cache_clear()
    load_client_data.cache_clear()
    load_client_data(cfg, 0)
    added = {p.name for p in partition_dir("").iterdir()} - before
    assert any(name.startswith("synthetic-metis-2-") for name in added)
