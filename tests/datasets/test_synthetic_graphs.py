"""The embedded graph-classification set: seeded, balanced, its class in the number of
communities rather than in the degree, options reaching it through the run config."""

from __future__ import annotations

import pytest
import torch

from fgl_flower.datasets.synthetic_graphs import synthetic_graphs
from fgl_flower.errors import ConfigError


def test_graphs_are_seeded_balanced_and_undirected():
    a, b = synthetic_graphs(num_graphs=60, seed=3), synthetic_graphs(num_graphs=60, seed=3)
    assert len(a) == 60 and a.num_classes == 3 and a.num_features == 8
    assert torch.equal(a[7].edge_index, b[7].edge_index) and torch.equal(a[7].x, b[7].x)
    assert not torch.equal(synthetic_graphs(num_graphs=60, seed=4)[7].x, a[7].x)
    assert torch.bincount(a.y.view(-1)).tolist() == [20, 20, 20]
    for g in (a[i] for i in range(len(a))):
        src, dst = g.edge_index
        assert (src != dst).all()
        pairs = set(zip(src.tolist(), dst.tolist()))
        assert all((d, s) in pairs for s, d in pairs)
        assert 12 <= g.num_nodes <= 30


def test_classes_differ_in_communities_not_in_degree():
    ds = synthetic_graphs(num_graphs=300, seed=0)
    degree = {c: [] for c in range(3)}
    for g in (ds[i] for i in range(len(ds))):
        degree[int(g.y)].append(g.edge_index.size(1) / g.num_nodes)
    means = [sum(v) / len(v) for v in degree.values()]
    assert max(means) - min(means) < 0.3 and all(3.5 < m < 4.5 for m in means)


@pytest.mark.parametrize(
    "kw",
    [
        {"num_classes": 1},
        {"min_nodes": 4},
        {"min_nodes": 40},
        {"p_out": 1.0},
        {"feature_signal": -1.0},
    ],
)
def test_bad_options_are_refused(kw):
    with pytest.raises(ConfigError, match="synthetic-graphs"):
        synthetic_graphs(num_graphs=30, **kw)


def test_options_reach_the_partition(tmp_path, monkeypatch):
    """``data.synthetic-graphs.*`` set in a run reaches the generator (graph datasets' options
    were once dropped on the way)."""
    from fgl_flower.datasets import load_client_data
    from fgl_flower.launch import flat_config
    from fgl_flower.parse import parse_run_config

    monkeypatch.setenv("FGL_CACHE_DIR", str(tmp_path))
    flat = flat_config(
        {
            "method": "fedavg",
            "dataset": "synthetic-graphs",
            "partition": "random",
            "model": "gin",
            "num-clients": 2,
            "data.synthetic-graphs.num-graphs": 40,
        }
    )
    cfg = parse_run_config(flat).data_config()
    sizes = [
        sum(len(s) for s in (c.train, c.val, c.test))
        for c in (load_client_data(cfg, i) for i in (0, 1))
    ]
    assert sizes == [20, 20]
