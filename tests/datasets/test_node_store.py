"""The array store of node partitions: each client's part is PyG's induced subgraph."""

import json

import numpy as np
import pytest
import torch

from fgl_flower.datasets.build import _node_part
from fgl_flower.datasets.node_store import induced_edges, load_node_part, write_node_parts
from fgl_flower.datasets.source import load_dataset


def _equal(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        if a.is_sparse or b.is_sparse:
            return (
                a.is_sparse
                and b.is_sparse
                and a.shape == b.shape
                and torch.equal(a.indices(), b.indices())
                and torch.equal(a.values(), b.values())
            )
        return a.dtype == b.dtype and torch.equal(a, b)
    return a == b


def _store(tmp_path, data, parts):
    meta = write_node_parts(tmp_path, data, parts)
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    return meta


@pytest.mark.parametrize("overlap", [False, True])
def test_parts_equal_the_whole_graph_subgraph_dense_features(tmp_path, overlap):
    data = load_dataset("synthetic", None, {"num-nodes": 400})
    parts = np.array_split(np.random.default_rng(0).permutation(data.num_nodes), 5)
    if overlap:  # shared nodes: one subgraph per part
        parts = [np.concatenate([parts[0], parts[1][:7]]), parts[1], parts[2]]
    meta = _store(tmp_path, data, parts)
    assert meta["num_parts"] == len(parts) and not meta["sparse_x"]
    for k, ids in enumerate(parts):
        want, got = _node_part(data, ids), load_node_part(tmp_path, k)
        assert want.keys() == got.keys()
        assert all(_equal(want[key], got[key]) for key in want), k


def test_parts_equal_the_whole_graph_subgraph_sparse_features(tmp_path, data_root):
    data = load_dataset("CS", str(data_root), {})  # stored sparse (SparseFeatures)
    assert data.x.is_sparse
    parts = np.array_split(np.random.default_rng(1).permutation(data.num_nodes), 6)
    assert _store(tmp_path, data, parts)["sparse_x"]
    for k, ids in enumerate(parts):
        want, got = _node_part(data, ids), load_node_part(tmp_path, k)
        assert all(_equal(want[key], got[key]) for key in want), k


def test_induced_edges_by_hand():
    # 0-1, 1-2, 2-3, 3-0, 1-1 (self-loop), 2-0; parts {2, 0} and {1, 3}
    edges = np.array([[0, 1, 2, 3, 1, 2], [1, 2, 3, 0, 1, 0]])
    ptr, local = induced_edges(edges, 4, [np.array([2, 0]), np.array([1, 3])])
    assert ptr.tolist() == [0, 1, 2]
    assert local[:, :1].tolist() == [[0], [1]]  # 2 -> 0 as local 0 -> 1
    assert local[:, 1:].tolist() == [[0], [0]]  # the self-loop of node 1


def test_files_do_not_grow_with_the_clients(tmp_path):
    data = load_dataset("synthetic", None, {"num-nodes": 2000})
    for k in (10, 1000):
        folder = tmp_path / str(k)
        folder.mkdir()
        _store(folder, data, np.array_split(np.arange(data.num_nodes), k))
        assert len(list(folder.iterdir())) == 7  # 6 arrays (dense features) and meta.json
