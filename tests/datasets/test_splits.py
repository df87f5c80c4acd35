import numpy as np
import pytest

from fgl_flower.datasets.splits import check_ratios, graph_split, random_split, stratified_split
from fgl_flower.errors import ConfigError


def _check_disjoint_cover(parts, n):
    allidx = np.concatenate(parts)
    assert np.unique(allidx).size == allidx.size == n


def test_random_split_counts():
    y = np.zeros(101, dtype=int)
    tr, va, te = random_split(y, (0.4, 0.3, 0.3), np.random.default_rng(0))
    assert (len(tr), len(va)) == (int(0.4 * 101), int(0.7 * 101) - int(0.4 * 101))
    _check_disjoint_cover((tr, va, te), 101)


def test_stratified_per_class():
    y = np.array([0] * 10 + [1] * 7 + [2] * 3)
    parts = stratified_split(y, (0.2, 0.4, 0.4), np.random.default_rng(1))
    _check_disjoint_cover(parts, y.size)
    for c, n_c in enumerate([10, 7, 3]):
        tr, va, _ = (np.sum(y[p] == c) for p in parts)
        assert (tr, va) == (int(n_c * 0.2), int(n_c * 0.4))


def test_seed_changes_split():
    y = np.zeros(50, dtype=int)
    a = random_split(y, (0.6, 0.2, 0.2), np.random.default_rng(0))[0]
    b = random_split(y, (0.6, 0.2, 0.2), np.random.default_rng(1))[0]
    assert not np.array_equal(a, b)


def test_graph_split_feddense_counts():
    y = np.array([0] * 63 + [1] * 125)  # MUTAG's labels: 150 / 19 / 19
    parts = graph_split(y, (0.8, 0.1, 0.1), 123)
    assert [len(p) for p in parts] == [150, 19, 19]
    _check_disjoint_cover(parts, 188)


@pytest.mark.parametrize("bad", [(0.5, 0.5, 0.5), (0.6, 0.4), (-0.1, 0.6, 0.5), ("a", 0, 1)])
def test_bad_ratios(bad):
    with pytest.raises(ConfigError):
        check_ratios(bad)
