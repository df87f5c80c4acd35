"""OGB datasets through :class:`OGBEntry`: tiny folders in OGB's layout (``ogb_layout``) read
by the ogb package, in the cache, without prompts, network or writes to the data root."""

from __future__ import annotations

import io
import os
import shutil
import stat
import subprocess
import sys
import types
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from ogb_layout import write_graph_dataset, write_node_dataset

from fgl_flower.datasets.catalog import NODE_OPTIONS
from fgl_flower.datasets.graphset import GraphSet
from fgl_flower.datasets.ogb import (
    OGB_DATASETS,
    _import_ogb,
    _master,
    _ogb_class,
    _Prompt,
    is_regression,
)
from fgl_flower.datasets.root import mirror_path
from fgl_flower.errors import CorruptDataError, DataUnavailableError


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    """Own cache; no answer on stdin, and a prompt anywhere fails the test at once."""
    monkeypatch.setenv("FGL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("FGL_OFFLINE", raising=False)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))

    def prompted(*args: object) -> str:
        raise AssertionError(f"prompted: {args}")

    monkeypatch.setattr("builtins.input", prompted)


def _tree(root: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(root)), p.stat().st_mtime_ns) for p in root.rglob("*"))


def test_node_dataset_is_read_as_written(tmp_path):
    root = tmp_path / "data"
    written = write_node_dataset(root, "ogbn-arxiv", num_nodes=30)
    entry = OGB_DATASETS["ogbn-arxiv"]
    assert entry.status(root) == (True, root / "ogbn_arxiv")
    data = entry.load(root, {"undirected": False})
    assert data.x.dtype == torch.float32 and data.x.shape == (30, 6)
    np.testing.assert_allclose(data.x.numpy(), written.x, rtol=1e-6)
    assert data.edge_index.dtype == torch.long
    assert torch.equal(data.edge_index, torch.from_numpy(written.edges))  # directed, as stored
    assert data.y.dtype == torch.long and data.y.shape == (30,)
    assert torch.equal(data.y, torch.from_numpy(written.y))
    assert data.num_classes == 40 and data.num_nodes == 30
    assert data.official_split.dtype == torch.long
    assert torch.equal(data.official_split, torch.from_numpy(written.split))
    assert (written.split == -1).any()  # nodes in no split stay -1
    assert set(data.keys()) == {
        "x",
        "edge_index",
        "y",
        "official_split",
        "num_nodes",
        "num_classes",
    }

    both = entry.load(root, {"undirected": True})
    pairs = set(map(tuple, both.edge_index.t().tolist()))
    assert {(b, a) for a, b in written.edges.T} <= pairs and len(pairs) == both.edge_index.size(1)
    assert torch.equal(both.y, data.y) and torch.equal(both.official_split, data.official_split)


@pytest.mark.parametrize("name", ["ogbg-molhiv", "ogbg-molesol"])
def test_graph_dataset_is_read_as_written(name, tmp_path):
    root = tmp_path / "data"
    written = write_graph_dataset(root, name, num_graphs=12)
    entry = OGB_DATASETS[name]
    regression = name == "ogbg-molesol"
    assert is_regression(entry) is regression
    graphs = entry.load(root, {})
    assert isinstance(graphs, GraphSet) and len(graphs) == 12
    assert graphs.num_classes == (1 if regression else 2) and graphs.num_features == 9
    for g, x, bonds in zip(graphs.graphs, written.x, written.edges, strict=True):
        assert g.x.dtype == torch.float32 and torch.equal(g.x, torch.from_numpy(x).float())
        both_ways = np.stack([bonds, bonds[::-1]], axis=2).reshape(2, -1)  # OGB adds reverses
        assert g.edge_index.dtype == torch.long
        assert torch.equal(g.edge_index, torch.from_numpy(both_ways))
        assert g.edge_attr.shape == (g.edge_index.size(1), 3) and g.num_nodes == len(x)
        assert g.y.shape == (1,)
        assert g.y.dtype == (torch.float32 if regression else torch.long)
    assert graphs.graphs[0].num_nodes == 1 and graphs.graphs[0].edge_index.shape == (2, 0)
    np.testing.assert_allclose(graphs.y.numpy(), written.y, rtol=1e-6)
    split = graphs.official_split
    assert isinstance(split, np.ndarray) and split.dtype.kind == "i"
    np.testing.assert_array_equal(split, written.split)


@pytest.mark.parametrize("name", sorted(OGB_DATASETS))
def test_offline_without_files_names_dataset_and_folder(name, tmp_path, monkeypatch):
    monkeypatch.setenv("FGL_OFFLINE", "1")
    entry = OGB_DATASETS[name]
    present, folder = entry.status(tmp_path)
    assert not present and folder == tmp_path / name.replace("-", "_")
    with pytest.raises(DataUnavailableError) as err:
        entry.load(tmp_path, {})
    message = str(err.value)
    assert repr(name) in message and str(folder) in message and "FGL_DATA_ROOT" in message
    assert "FGL_OFFLINE" in message


def test_files_without_release_marker_are_refused_not_prompted(tmp_path):
    root = tmp_path / "data"
    written = write_graph_dataset(root, "ogbg-molhiv")
    (written.folder / "RELEASE_v1.txt").unlink()
    with pytest.raises(CorruptDataError, match=r"'ogbg-molhiv'.*RELEASE_v1\.txt"):
        OGB_DATASETS["ogbg-molhiv"].load(root, {})
    # ogb's own question, should it still come, is an error too (never a wait for stdin)
    cls = _ogb_class("graph")
    with pytest.raises(_Prompt, match="update the dataset"):
        cls(name="ogbg-molhiv", root=str(root))


def test_damaged_files_are_corrupt_data(tmp_path):
    root = tmp_path / "data"
    written = write_node_dataset(root, "ogbn-arxiv")
    (written.folder / "raw" / "node-label.csv.gz").write_bytes(b"not gzip")
    with pytest.raises(CorruptDataError, match=r"'ogbn-arxiv'.*corrupt or incomplete"):
        OGB_DATASETS["ogbn-arxiv"].load(root, {})


def test_read_only_data_root_is_processed_in_the_cache(tmp_path):
    root = tmp_path / "data"
    write_node_dataset(root, "ogbn-arxiv")
    write_graph_dataset(root, "ogbg-molhiv")
    before = _tree(root)
    paths = [root, *root.rglob("*")]
    for p in paths:
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        assert OGB_DATASETS["ogbn-arxiv"].load(root, {}).num_nodes == 30
        assert len(OGB_DATASETS["ogbg-molhiv"].load(root, {})) == 12
        assert len(OGB_DATASETS["ogbg-molhiv"].load(root, {})) == 12  # processed file reused
    finally:
        for p in paths:
            p.chmod(p.stat().st_mode | stat.S_IWUSR)
    assert _tree(root) == before
    assert (mirror_path(root, "ogbn_arxiv") / "processed").is_dir()


def test_missing_files_are_downloaded_into_the_cache(tmp_path, monkeypatch):
    """Online, ogb's URL is fetched (here: a zip made from the layout) without its prompt."""
    source = tmp_path / "zip-source"
    written = write_graph_dataset(source, "ogbg-molhiv")
    shutil.move(written.folder, source / "hiv")  # OGB's zip holds hiv/
    urls = []

    def download_url(url: str, folder: str, log: bool = True) -> str:
        urls.append(url)
        path = Path(folder) / url.rpartition("/")[2]
        with zipfile.ZipFile(path, "w") as zf:
            for p in (source / "hiv").rglob("*"):
                zf.write(p, p.relative_to(source))
        return str(path)

    import ogb.utils.url

    monkeypatch.setattr(ogb.utils.url, "download_url", download_url)
    root = tmp_path / "data"
    root.mkdir()
    entry = OGB_DATASETS["ogbg-molhiv"]
    graphs = entry.load(root, {})
    assert len(graphs) == 12 and urls == [_master("graph")["ogbg-molhiv"]["url"]]
    np.testing.assert_array_equal(graphs.official_split, written.split)
    assert list(root.iterdir()) == []  # nothing written into the data root
    mirror = mirror_path(root, "ogbg_molhiv")
    assert entry.status(root) == (True, root / "ogbg_molhiv")
    assert not list(mirror.parent.glob("*.zip")) and not (mirror.parent / "hiv").exists()
    assert len(entry.load(root, {})) == 12 and len(urls) == 1  # read from the cache after


def test_a_failed_download_is_unavailable_and_cleaned_up(tmp_path, monkeypatch):
    import ogb.utils.url

    def offline(url: str, folder: str, log: bool = True) -> str:
        (Path(folder) / url.rpartition("/")[2]).write_bytes(b"partial")
        raise OSError("network is unreachable")

    monkeypatch.setattr(ogb.utils.url, "download_url", offline)
    with pytest.raises(DataUnavailableError, match="download failed: OSError"):
        OGB_DATASETS["ogbg-molesol"].load(tmp_path, {})
    assert not list(mirror_path(tmp_path, "ogbg_molesol").parent.glob("*.zip"))


def test_the_table_agrees_with_ogb():
    for name, entry in OGB_DATASETS.items():
        meta = _master(entry.task)[name]
        assert meta["num tasks"] == "1" and meta["binary"] == "False", name
        assert meta.get("is hetero", "False") == "False", name
        assert entry.regression == (meta["task type"] == "regression"), name
        if not entry.regression:
            assert meta["task type"] in {"multiclass classification", "binary classification"}
        assert entry.folder == name.replace("-", "_")
        assert entry.options == (NODE_OPTIONS if entry.task == "node" else {})
    assert {"ogbn-arxiv", "ogbn-products", "ogbg-molhiv", "ogbg-mollipo"} <= set(OGB_DATASETS)
    assert not {"ogbn-proteins", "ogbg-molpcba", "ogbg-moltox21", "ogbg-ppa"} & set(OGB_DATASETS)


def test_ogb_is_imported_without_its_version_check(monkeypatch):
    """``ogb.version`` would ask PyPI (no timeout) in a thread when ``outdated`` imports."""
    calls = []
    stub = types.ModuleType("outdated")
    stub.check_outdated = lambda *a: calls.append(a)  # type: ignore[attr-defined]
    for key in [k for k in sys.modules if k == "ogb" or k.startswith("ogb.")]:
        monkeypatch.delitem(sys.modules, key)
    monkeypatch.setitem(sys.modules, "outdated", stub)
    _import_ogb()
    assert sys.modules["ogb.version"].check_outdated is None and not calls
    assert sys.modules["outdated"] is stub  # put back as it was


def test_the_module_imports_neither_torch_nor_ogb():
    code = "import sys, fgl_flower.datasets.ogb; print(sorted({'torch', 'ogb'} & set(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ
    )
    assert out.stdout.strip() == "[]"


def test_ogb_through_the_pipeline_keeps_the_official_split(tmp_path):
    """Catalog name -> partition -> a client's part: each node (graph) keeps OGB's split."""
    from fgl_flower.datasets import DataConfig, load_client_data

    root = tmp_path / "data"
    nodes = write_node_dataset(root, "ogbn-arxiv", num_nodes=40)
    cfg = DataConfig("ogbn-arxiv", "random", 2, split_mode="official", data_root=str(root))
    for k in range(2):
        c = load_client_data(cfg, k)
        ids = c.data.global_id.numpy()
        assert np.array_equal(c.data.y.numpy(), nodes.y[ids])
        for code, mask in enumerate((c.data.train_mask, c.data.val_mask, c.data.test_mask)):
            assert np.array_equal(mask.numpy(), nodes.split[ids] == code)
    graphs = write_graph_dataset(root, "ogbg-molhiv", num_graphs=12)
    cfg = DataConfig("ogbg-molhiv", "random", 2, split_mode="official", data_root=str(root))
    seen = []
    for k in range(2):
        c = load_client_data(cfg, k)
        for code, part in enumerate((c.train, c.val, c.test)):
            seen += [(int(g.y.view(-1)[0]), code) for g in part]
    assert sorted(seen) == sorted(zip(graphs.y.reshape(-1).tolist(), graphs.split.tolist()))
