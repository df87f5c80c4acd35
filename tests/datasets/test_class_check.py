"""The class check before a run: remembered per partition and split, answered without torch."""

import json
import os
import subprocess
import sys

import pytest

from fgl_flower.datasets import DataConfig
from fgl_flower.datasets.cache import partition_tag, stored_partition
from fgl_flower.datasets.class_check import CLASSES_FILE, check_training_classes, labels, split_key
from fgl_flower.datasets.resolve import _resolve
from fgl_flower.datasets.stats import class_labels
from fgl_flower.errors import ConfigError

# 1 % of 100 nodes per client in training: 3 training nodes for 3 classes, per client
BAD_SPLIT = (0.01, 0.2, 0.79)


def _cfg(**kw) -> DataConfig:
    return DataConfig("synthetic", "random", 3, options=(("num-nodes", 300),), **kw)


def _folder(cfg: DataConfig):
    return stored_partition(partition_tag(_resolve(cfg), cfg)[0])


def _fresh_process(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_answer_is_kept_per_split_and_equals_loading_every_client():
    ok, bad = _cfg(split_seed=7), _cfg(split_seed=7, split=BAD_SPLIT)
    check_training_classes(ok)
    with pytest.raises(ConfigError, match="no training node"):
        check_training_classes(bad)
    stored = json.loads((_folder(ok) / CLASSES_FILE).read_text())
    assert {split_key(ok), split_key(bad)} <= set(stored)
    for cfg in (ok, bad):
        loaded = {
            name: (kind, sorted(p), sorted(t), sorted(i))
            for name, (kind, p, t, i) in class_labels(cfg).items()
        }
        assert labels(cfg) == loaded == {n: tuple(v) for n, v in stored[split_key(cfg)].items()}
    # the split decides: the bad split trains fewer classes than the good one
    _, present, trained, idle = labels(ok)["synthetic"]
    assert idle == []
    assert len(labels(bad)["synthetic"][2]) < len(trained) == len(present) > 1


def test_a_cached_answer_is_given_without_torch_and_still_refuses():
    """What lets the launcher of a simulation skip importing torch (seconds) on a cached run."""
    ok, bad = _cfg(split_seed=8), _cfg(split_seed=8, split=BAD_SPLIT)
    check_training_classes(ok)
    with pytest.raises(ConfigError):
        check_training_classes(bad)
    code = f"""
import sys
from fgl_flower.datasets import DataConfig
from fgl_flower.datasets.class_check import check_training_classes
from fgl_flower.errors import ConfigError
opts = (("num-nodes", 300),)
check_training_classes(DataConfig("synthetic", "random", 3, split_seed=8, options=opts))
try:
    check_training_classes(DataConfig("synthetic", "random", 3, split_seed=8, split={BAD_SPLIT},
                                      options=opts))
    print("NOT REFUSED")
except ConfigError as e:
    print("refused:", e)
print("torch imported:", "torch" in sys.modules)
"""
    res = _fresh_process(code)
    assert res.returncode == 0, res.stderr
    assert "refused: synthetic: class(es)" in res.stdout
    assert "torch imported: False" in res.stdout


def test_a_damaged_answer_file_is_computed_again():
    cfg = _cfg(split_seed=9)
    check_training_classes(cfg)
    path = _folder(cfg) / CLASSES_FILE
    path.write_text("{not json")
    assert labels(cfg)["synthetic"][2] == labels(cfg)["synthetic"][1] == [0, 1, 2, 3]
    assert split_key(cfg) in json.loads(path.read_text())


def test_a_client_without_a_training_example_is_refused_also_with_allow():
    """0.2 % of 100 nodes: no client has a training node; a loss over none is NaN, which
    would otherwise surface in round 1 as a diverged learning rate."""
    idle = _cfg(split_seed=10, split=(0.002, 0.2, 0.798))
    for allow in (False, True):
        with pytest.raises(
            ConfigError,
            match=r"client\(s\) \[0, 1, 2\] have no training node "
            r"\(split=0.002,0.2,0.798, split-mode=random\)",
        ):
            check_training_classes(idle, allow=allow)


def test_an_answer_written_before_the_idle_clients_were_kept_is_computed_again():
    cfg = _cfg(split_seed=11)
    check_training_classes(cfg)
    path = _folder(cfg) / CLASSES_FILE
    stored = json.loads(path.read_text())
    path.write_text(json.dumps({k: {n: e[:3] for n, e in v.items()} for k, v in stored.items()}))
    assert labels(cfg)["synthetic"][3] == []
    assert len(json.loads(path.read_text())[split_key(cfg)]["synthetic"]) == 4
