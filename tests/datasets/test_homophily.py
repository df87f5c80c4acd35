"""Edge and node homophily, per client and on FedHERO's whole graphs."""

import math

import numpy as np
import pytest

from fgl_flower.datasets import DataConfig, partition_stats
from fgl_flower.datasets.homophily import edge_homophily, node_homophily


def test_hand_made_graph():
    # 0-1 (same), 0-2 (diff), 0-3 (same), 2-4 (diff); node 5 has no neighbour.
    y = np.array([0, 0, 1, 0, 0, 1])
    edges = np.array([[0, 0, 0, 2], [1, 2, 3, 4]])
    assert edge_homophily(edges, y) == pytest.approx(2 / 4)
    # node 0: 2/3, node 1: 1, node 2: 0, node 3: 1, node 4: 0; node 5 is left out
    assert node_homophily(edges, y) == pytest.approx((2 / 3 + 1 + 0 + 1 + 0) / 5)
    assert math.isnan(node_homophily(np.empty((2, 0), dtype=np.int64), y))
    assert math.isnan(edge_homophily(np.empty((2, 0), dtype=np.int64), y))


def test_partition_stats_report_both():
    stats = partition_stats(DataConfig("synthetic", "metis", 2))
    assert all(0.5 < s["node_homophily"] <= 1 and 0.5 < s["edge_homophily"] <= 1 for s in stats)


def test_chameleon_origin_matches_the_spec(data_root):
    """FedHERO Table 7 "Origin" is node homophily: 0.247 on undirected chameleon (spec §5.2)."""
    cfg = DataConfig(
        "chameleon", "random", 1, data_root=str(data_root), options=(("undirected", True),)
    )
    [whole] = partition_stats(cfg)
    assert whole["nodes"] == 2277 and whole["edges"] == 31371
    assert whole["node_homophily"] == pytest.approx(0.247, abs=5e-4)
    assert whole["edge_homophily"] == pytest.approx(0.230, abs=5e-4)
