"""FGGP's server: FINCH on hand-made point sets, per-class clustering and the FIFO memory."""

import numpy as np

from fgl_flower.strategies.fggp import class_clusters, enqueue, finch, first_neighbour_partition


def unit(deg):
    return np.stack([np.cos(np.radians(deg)), np.sin(np.radians(deg))], axis=1)


def test_first_neighbours_link_chains_and_shared_neighbours():
    # angles 0, 2, 5 | 60, 61 | 120, 123: first neighbours 0->1, 1->0, 2->1, 3<->4, 5<->6
    labels = first_neighbour_partition(unit(np.array([0, 2, 5, 60, 61, 120, 123])))
    assert labels.tolist() == [0, 0, 0, 1, 1, 2, 2]
    assert first_neighbour_partition(unit(np.array([7.0]))).tolist() == [0]


def test_finch_merges_cluster_means_and_stops_before_one_cluster():
    # level 0: {0, 2}, {40, 42}, {150, 152}, {190, 192}; their means' first neighbours pair
    # {1, 41} and {151, 191}: level 1 has two clusters; one more merge would leave one
    pts = unit(np.array([0, 2, 40, 42, 150, 152, 190, 192]))
    parts = finch(pts)
    assert [int(p.max()) + 1 for p in parts] == [4, 2]
    assert parts[-1].tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    # two points: their partition is one cluster, FINCH's first level kept as it is
    assert [p.tolist() for p in finch(unit(np.array([0, 90])))] == [[0, 0]]


def test_class_clusters_average_each_class_coarsest_partition():
    protos = np.concatenate([unit(np.array([0, 2, 90, 92])), unit(np.array([45]))])
    classes = np.array([3, 3, 3, 3, 1])
    centroids, labels = class_clusters(protos, classes)
    assert labels.tolist() == [1, 3, 3]
    assert np.allclose(centroids[0], protos[4])  # a single prototype stays
    assert np.allclose(centroids[1], protos[:2].mean(0), atol=1e-6)
    assert np.allclose(centroids[2], protos[2:4].mean(0), atol=1e-6)


def test_the_memory_is_a_fifo_of_unit_prototypes():
    mem, cls = enqueue(None, None, np.array([[3.0, 4.0]]), np.array([0]), capacity=3)
    assert np.allclose(mem, [[0.6, 0.8]]) and cls.tolist() == [0]
    mem, cls = enqueue(
        mem, cls, np.array([[1.0, 0.0], [0.0, 2.0], [5.0, 0.0]]), np.array([1, 2, 1]), capacity=3
    )
    assert np.allclose(mem, [[1, 0], [0, 1], [1, 0]]) and cls.tolist() == [
        1,
        2,
        1,
    ]  # the oldest left
