"""experiments/s2fgl/edge_retention.py: the statistics behind the shipped-partition finding."""

import numpy as np
import pytest


@pytest.fixture(scope="module")
def retention(experiment_script):
    return experiment_script("s2fgl/edge_retention.py").retention


def test_counts_kept_edges_by_component(retention):
    # Largest component: path 0-1-2-3; small ones: {4, 5} and {6, 7, 8}.
    edges = np.array([[0, 1, 2, 4, 6, 7], [1, 2, 3, 5, 7, 8]])
    owner = np.array([0, 0, 1, 1, 0, 1, 1, 1, 0])
    r = retention(owner, edges)
    assert r["edges"] == 6
    assert r["kept"] == pytest.approx(3 / 6)  # 0-1, 2-3, 6-7
    assert r["kept_lcc"] == pytest.approx(2 / 3)
    assert r["kept_rest"] == pytest.approx(1 / 3)
    assert r["whole_2"] == 0.0 and r["whole_3"] == 0.0


def test_whole_components_kept(retention):
    edges = np.array([[0, 1, 3], [1, 2, 4]])
    r = retention(np.array([0, 0, 0, 1, 1]), edges)
    assert r["kept"] == 1.0 and r["whole_2"] == 1.0 and r["whole_3"] == 1.0


def test_per_node_shares_of_degree_3_nodes(retention):
    # Star 0-{1,2,3} and star 4-{5,6,7}: node 0 keeps all of its edges, node 4 none.
    edges = np.array([[0, 0, 0, 4, 4, 4], [1, 2, 3, 5, 6, 7]])
    owner = np.array([0, 0, 0, 0, 1, 2, 2, 2])
    r = retention(owner, edges)
    assert r["none_deg3"] == pytest.approx(1 / 2)
    assert r["most_deg3"] == pytest.approx(1 / 2)
