"""Bad data stops before training with one message that says what to do."""

import re
import shutil

import pytest

from fgl_flower.datasets import DATASETS, DataConfig, dataset_status, load_client_data, load_dataset
from fgl_flower.datasets.class_check import check_training_classes
from fgl_flower.errors import ConfigError, CorruptDataError, DataUnavailableError


def test_corrupt_raw_files_name_the_folder_and_the_fix(tmp_path, data_root):
    raw = tmp_path / "Planetoid" / "Cora" / "raw"
    raw.mkdir(parents=True)
    for f in (data_root / "Planetoid" / "Cora" / "raw").iterdir():
        (raw / f.name).write_bytes(b"not a pickle")
    with pytest.raises(
        CorruptDataError, match=r"(?s)Cora.*" + re.escape(str(raw)) + " are likely corrupt"
    ):
        load_dataset("Cora", tmp_path)


def test_truncated_raw_file(tmp_path, data_root):
    shutil.copytree(data_root / "Planetoid" / "Cora", tmp_path / "Planetoid" / "Cora")
    x = tmp_path / "Planetoid" / "Cora" / "raw" / "ind.cora.x"
    x.write_bytes(x.read_bytes()[:100])
    with pytest.raises(CorruptDataError, match="reading its files failed"):
        load_dataset("Cora", tmp_path)


def _files(tmp_path, *lists):
    for k, ids in enumerate(lists):
        (tmp_path / f"synthetic_{k:02d}.txt").write_text("".join(f"{i}\n" for i in ids))
    return DataConfig("synthetic", "files", len(lists), options=(("dir", str(tmp_path)),))


@pytest.mark.parametrize(
    "lists,match",
    [
        (([0, 1, 2], [2, 3]), r"synthetic_00.txt and synthetic_01.txt both list node\(s\) \[2\]"),
        (([0, 1], [5, 100000]), r"synthetic_01.txt lists node ids outside \[0, 1000\).*\[100000\]"),
        (([0, 1], []), r"left clients \[1\] empty"),
        (([0, 1], ["x"]), r"synthetic_01.txt is not a list of node ids"),
        (([0, 1], [2.5]), r"non-integer node ids"),
    ],
)
def test_bad_partition_files(tmp_path, lists, match):
    with pytest.raises(ConfigError, match=match):
        load_client_data(_files(tmp_path, *lists), 0)


def test_a_class_without_training_nodes_anywhere_is_refused():
    ok = DataConfig("synthetic", "random", 3)
    check_training_classes(ok)
    # 1 % of 100 nodes per client in training: 3 training nodes for 3 classes, per client
    bad = DataConfig(
        "synthetic", "random", 3, split=(0.01, 0.2, 0.79), options=(("num-nodes", 300),)
    )
    with pytest.raises(
        ConfigError, match=r"synthetic: class\(es\) \[\d.*no training node on any client"
    ):
        check_training_classes(bad)


def test_untrained_classes_allow_warns_instead(caplog):
    """``untrained-classes = allow`` (protocols with one-node classes, e.g. Texas) goes on
    with a warning that names the classes."""
    import logging

    bad = DataConfig(
        "synthetic", "random", 3, split=(0.01, 0.2, 0.79), options=(("num-nodes", 300),)
    )
    with caplog.at_level(logging.WARNING, logger="flwr"):
        check_training_classes(bad, allow=True)
    assert re.search(
        r"synthetic: class\(es\) \[\d.*no training node on any client.*untrained-classes=allow",
        caplog.text,
    )


@pytest.mark.parametrize(
    "name", ["Flickr", "WikiCS", "questions", "Physics", "COLLAB", "syn-cora-h0.99-r3"]
)
def test_a_missing_dataset_names_itself_its_folder_and_the_data_root(name, tmp_path, monkeypatch):
    monkeypatch.setenv("FGL_OFFLINE", "1")
    present, folder = dataset_status(name, tmp_path)
    assert not present
    with pytest.raises(DataUnavailableError) as err:
        load_dataset(name, tmp_path)
    message = str(err.value)
    assert repr(DATASETS.canonical(name)) in message and str(folder) in message
    assert "FGL_DATA_ROOT" in message
