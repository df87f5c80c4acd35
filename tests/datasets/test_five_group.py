"""``split-mode=five-group``: five node groups of the whole graph, rotated over five folds."""

import numpy as np
import pytest

from fgl_flower.app_defaults import load_app_defaults
from fgl_flower.datasets import DataConfig, load_client_data
from fgl_flower.datasets.splits import NodeGroups, five_group_split, node_groups
from fgl_flower.parse import parse_run_config


def test_groups_are_a_seeded_near_equal_cut():
    g = node_groups(1003, 7)
    assert sorted(np.bincount(g).tolist()) == [200, 200, 201, 201, 201]
    assert np.array_equal(g, node_groups(1003, 7)) and not np.array_equal(g, node_groups(1003, 8))


def test_fold_j_tests_on_group_j_and_validates_on_group_j_plus_1():
    group = np.array([0, 1, 2, 3, 4, 4, 0])
    tr, va, te = five_group_split(np.zeros(7), (0.6, 0.2, 0.2), NodeGroups(group, 4))
    assert (te.tolist(), va.tolist(), tr.tolist()) == ([4, 5], [0, 6], [1, 2, 3])


def _global_masks(cfg: DataConfig) -> dict[str, np.ndarray]:
    """``{mask: global ids}`` over all clients."""
    out = {"train": [], "val": [], "test": []}
    for k in range(cfg.num_clients):
        d = load_client_data(cfg, k).data
        for name, ids in out.items():
            ids.append(d.global_id[getattr(d, f"{name}_mask")].numpy())
    return {name: np.sort(np.concatenate(v)) for name, v in out.items()}


def _cfg(fold: int, partition: str = "metis", clients: int = 3) -> DataConfig:
    return DataConfig(
        "synthetic", partition, clients, split_mode="five-group", split_seed=3, split_fold=fold
    )


def test_the_five_folds_rotate_over_the_whole_graph():
    folds = [_global_masks(_cfg(j)) for j in range(5)]
    tests = np.concatenate([f["test"] for f in folds])
    assert np.array_equal(np.sort(tests), np.arange(1000))  # the test sets partition the nodes
    for j, f in enumerate(folds):
        assert np.array_equal(f["val"], folds[(j + 1) % 5]["test"])
        assert f["train"].size == 600
        assert np.union1d(np.union1d(f["train"], f["val"]), f["test"]).size == 1000


def test_groups_do_not_depend_on_the_partition_or_the_client_count():
    a = _global_masks(_cfg(2, "metis", 3))
    for partition, clients in (("random", 5), ("louvain", 2)):
        b = _global_masks(_cfg(2, partition, clients))
        assert all(np.array_equal(a[k], b[k]) for k in a)


def test_run_config_rotates_folds_with_the_seed():
    flat = {**load_app_defaults(), "split-mode": "five-group"}
    folds = [parse_run_config({**flat, "seed": s}).data_config().split_fold for s in range(7)]
    assert folds == [0, 1, 2, 3, 4, 0, 1]
    assert parse_run_config({**flat, "seed": 3, "split-fold": 1}).data_config().split_fold == 1


@pytest.mark.parametrize(
    "key,value,match",
    [
        ("split-fold", 5, "split-fold must be -1"),
        ("split-fold", -2, "split-fold must be -1"),
        ("edge-flip", 1.0, r"edge-flip must be in \[0, 1\)"),
        ("edge-flip", -0.5, r"edge-flip must be in \[0, 1\)"),
        ("num-clients", -2, "num-clients must be at least 1, 0 for the partition"),
    ],
)
def test_bad_values_of_the_new_keys(key, value, match):
    from fgl_flower.errors import ConfigError

    with pytest.raises(ConfigError, match=match):
        parse_run_config({**load_app_defaults(), key: value})
