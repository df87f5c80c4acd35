"""A user's own graph: every source gives the same clients, bad data stops with one line,
the edge options do what they say, and a user's partition is the assignment given."""

import csv
import logging
import os

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from fgl_flower.cli import main
from fgl_flower.datasets import (
    DataConfig,
    load_client_data,
    load_dataset,
    natural_num_clients,
    store_object,
)
from fgl_flower.datasets.build import client_part, partition_folder
from fgl_flower.datasets.checks import DataError
from fgl_flower.datasets.partition.assign import store_assignment
from fgl_flower.errors import ConfigError


def sbm(n: int = 90, seed: int = 0) -> Data:
    """Three planted classes, features around their one-hot means, undirected edges."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 3
    same = y[:, None] == y[None, :]
    p = torch.where(same, 0.15, 0.01)
    a = torch.triu(torch.rand(n, n, generator=g) < p, 1)
    edge_index = torch.nonzero(a | a.T).T.contiguous()
    x = torch.nn.functional.one_hot(y, 3).float() + 0.5 * torch.randn(n, 3, generator=g)
    return Data(x=x, edge_index=edge_index, y=y)


def write_sources(data: Data, folder) -> dict[str, str]:
    """The graph as every source: a stored object, .pt, .npz, a CSV pair."""
    torch.save(data, folder / "g.pt")
    np.savez(
        folder / "g.npz", x=data.x.numpy(), edge_index=data.edge_index.numpy(), y=data.y.numpy()
    )
    with open(folder / "nodes.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "label", "a", "b", "c"])
        for i in range(data.num_nodes):
            w.writerow([f"n{i}", int(data.y[i]), *data.x[i].tolist()])
    with open(folder / "edges.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["source", "target"])
        w.writerows([f"n{a}", f"n{b}"] for a, b in data.edge_index.T.tolist())
    return {
        "object": str(store_object(data)),
        "pt": str(folder / "g.pt"),
        "npz": str(folder / "g.npz"),
        "csv": str(folder / "edges.csv"),
    }


def _same(a, b) -> None:
    for name in ("x", "edge_index", "y", "train_mask", "val_mask", "test_mask", "global_id"):
        assert torch.equal(getattr(a.data, name), getattr(b.data, name)), name


def test_every_node_source_gives_the_same_clients(tmp_path):
    refs = write_sources(sbm(), tmp_path)
    clients = {
        k: [load_client_data(DataConfig(ref, "metis", 3), i) for i in range(3)]
        for k, ref in refs.items()
    }
    for k in ("pt", "npz", "csv"):
        for a, b in zip(clients["object"], clients[k]):
            _same(a, b)
    assert clients["object"][0].num_classes == 3
    assert sum(c.num_local for c in clients["object"]) == 90


def test_every_graph_source_gives_the_same_clients(tmp_path):
    graphs = [
        Data(x=sbm(12, s).x, edge_index=sbm(12, s).edge_index, y=torch.tensor([s % 2]))
        for s in range(30)
    ]
    torch.save(graphs, tmp_path / "graphs.pt")
    a = load_client_data(DataConfig(str(store_object(graphs)), "random", 2), 1)
    b = load_client_data(DataConfig(str(tmp_path / "graphs.pt"), "random", 2), 1)
    assert a.kind == b.kind == "graph" and a.num_classes == 2
    for split in ("train", "val", "test"):
        for ga, gb in zip(getattr(a, split), getattr(b, split)):
            assert torch.equal(ga.x, gb.x) and torch.equal(ga.edge_index, gb.edge_index)
            assert torch.equal(ga.y, gb.y)


def test_an_object_is_stored_once_by_its_content():
    data = sbm()
    assert store_object(data) == store_object(sbm())
    other = sbm(seed=1)
    assert store_object(other) != store_object(data)


def test_a_changed_file_is_partitioned_again(tmp_path):
    path = tmp_path / "g.pt"
    torch.save(sbm(), path)
    cfg = DataConfig(str(path), "random", 3)
    before = partition_folder(cfg)
    torch.save(sbm(seed=5), path)  # other edges and features
    os.utime(path, ns=(1, 1))  # a new stamp, however fast the file was written again
    after = partition_folder(cfg)
    assert before != after and before.name.startswith("g-") and after.name.startswith("g-")


def bad(**kw) -> Data:
    data = sbm(12)
    for k, v in kw.items():
        setattr(data, k, v)
    return data


@pytest.mark.parametrize(
    "data,match",
    [
        (bad(y=None), "no labels y"),
        (bad(y=torch.zeros(5, dtype=torch.long)), "y has 5 entries but x has 12 rows"),
        (
            bad(edge_index=torch.tensor([[0, 1], [1, 40]])),
            r"node ids outside \[0, 12\) \(e.g. 40\)",
        ),
        (bad(edge_index=torch.zeros(3, 4, dtype=torch.long)), r"shape \[3, 4\]; give \[2, E\]"),
        (bad(x=torch.full((12, 3), float("nan"))), "NaN or infinite values"),
        (bad(x=torch.zeros(0, 3), y=torch.zeros(0, dtype=torch.long)), "no nodes"),
        (bad(x=None), "no node features x"),
        (bad(y=torch.rand(12)), "non-integer values"),
        (bad(y=torch.full((12,), -1)), "no node has a label"),
        (
            bad(train_mask=torch.ones(3, dtype=torch.bool)),
            r"train_mask must be a bool tensor \[N\]",
        ),
    ],
)
def test_bad_node_data_stops_with_one_line(tmp_path, data, match):
    path = tmp_path / "bad.pt"
    torch.save(data, path)
    with pytest.raises(DataError, match=match) as err:
        load_dataset(str(path))
    assert "\n" not in str(err.value) and str(path) in str(err.value)


@pytest.mark.parametrize(
    "graphs,match",
    [
        ([], "holds a list"),
        (
            [Data(x=torch.ones(3, 2), edge_index=torch.zeros(2, 0, dtype=torch.long))],
            "needs one target y",
        ),
        (
            [
                Data(
                    x=torch.ones(3, 2),
                    edge_index=torch.zeros(2, 0, dtype=torch.long),
                    y=torch.tensor([0]),
                ),
                Data(
                    x=torch.ones(3, 4),
                    edge_index=torch.zeros(2, 0, dtype=torch.long),
                    y=torch.tensor([1]),
                ),
            ],
            r"different feature sizes \[2, 4\]",
        ),
        (
            [Data(x=torch.ones(2, 2), edge_index=torch.tensor([[0], [2]]), y=torch.tensor([0]))],
            r"graph 0: edge_index",
        ),
    ],
)
def test_bad_graph_data_stops_with_one_line(tmp_path, graphs, match):
    path = tmp_path / "bad.pt"
    torch.save(graphs, path)
    with pytest.raises(ConfigError, match=match):
        load_dataset(str(path))


def test_bad_data_exits_with_code_2_before_training(tmp_path, capsys):
    path = tmp_path / "bad.npz"
    np.savez(path, x=np.ones((4, 2)), edge_index=np.array([[0, 1], [1, 9]]), y=np.zeros(4))
    code = main(
        [
            "run",
            "--dataset",
            str(path),
            "--partition",
            "random",
            "--clients",
            "2",
            "--out",
            str(tmp_path / "run"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "node ids outside [0, 4)" in err
    assert not (tmp_path / "run" / "rounds.jsonl").exists()


def test_a_missing_file_names_it():
    with pytest.raises(FileNotFoundError, match="nowhere.npz"):
        load_dataset("nowhere.npz")


def test_edge_options_and_what_is_logged(tmp_path, caplog):
    data = Data(
        x=torch.ones(4, 1),
        y=torch.tensor([0, 1, 0, 1]),
        edge_index=torch.tensor([[0, 0, 1, 2, 2, 3], [1, 1, 0, 2, 3, 0]]),
    )  # (0,1) twice, (2,2) a loop, (2,3) and (3,0) one-way
    path = tmp_path / "g.pt"
    torch.save(data, path)
    with caplog.at_level(logging.INFO):
        default = load_dataset(str(path))
    said = caplog.text
    assert "1 self-loops kept (data.self-loops=remove drops them)" in said
    assert "1 duplicate edges removed (data.duplicates=keep keeps them)" in said
    assert "2 edges without their reverse (data.undirected=true adds it)" in said
    assert default.edge_index.tolist() == [[0, 1, 2, 2, 3], [1, 0, 2, 3, 0]]
    tidy = load_dataset(str(path), options={"self-loops": "remove", "undirected": True})
    pairs = set(map(tuple, tidy.edge_index.T.tolist()))
    assert pairs == {(0, 1), (1, 0), (2, 3), (3, 2), (3, 0), (0, 3)}
    kept = load_dataset(str(path), options={"duplicates": "keep"})
    assert kept.edge_index.size(1) == 6
    with pytest.raises(ConfigError, match="data.self-loops='drop'; use one of keep, remove"):
        load_dataset(str(path), options={"self-loops": "drop"})


def test_masks_become_the_official_split(tmp_path):
    data = sbm(12)
    data.train_mask = torch.arange(12) < 6
    data.test_mask = torch.arange(12) >= 9
    path = tmp_path / "g.pt"
    torch.save(data, path)
    assert load_dataset(str(path)).official_split.tolist() == [0] * 6 + [-1] * 3 + [2] * 3


def test_a_user_partition_is_the_assignment_given(tmp_path):
    ref = str(store_object(sbm()))
    assign = np.random.default_rng(0).integers(-1, 4, size=90)
    for file in (store_assignment(assign), tmp_path / "a.csv"):
        if str(file).endswith(".csv"):
            (tmp_path / "a.csv").write_text("client\n" + "\n".join(map(str, assign)) + "\n")
        cfg = DataConfig(ref, "assign", 0, options=(("file", str(file)),))
        for k in range(4):
            part = client_part(DataConfig(ref, "assign", 4, options=cfg.options), k)
            assert part["global_id"].tolist() == np.flatnonzero(assign == k).tolist()


@pytest.mark.parametrize(
    "assign,clients,match",
    [
        (np.zeros(5, dtype=int), 0, "has 5 entries but .* has 90 items"),
        (np.repeat([0, 2], 45), 0, r"clients \[1\] .* hold no item"),
        (np.repeat([0, 1], 45), 3, "gives 2 clients .* not num-clients=3"),
        (np.full(90, -2), 0, "client id -2"),
    ],
)
def test_bad_assignments(assign, clients, match):
    ref = str(store_object(sbm()))
    cfg = DataConfig(ref, "assign", clients, options=(("file", str(store_assignment(assign))),))
    with pytest.raises(ConfigError, match=match):
        natural_num_clients(cfg) if clients == 0 else load_client_data(cfg, 0)


def test_the_official_split_follows_each_node_into_its_client(tmp_path):
    data = sbm()
    split = torch.arange(90) % 4 - 1  # -1 (none), 0, 1, 2 in turn
    data.train_mask, data.val_mask, data.test_mask = (split == 0), (split == 1), (split == 2)
    ref = str(store_object(data))
    for k in range(3):
        c = load_client_data(DataConfig(ref, "metis", 3, split_mode="official"), k)
        ids = c.data.global_id
        for s, mask in enumerate((c.data.train_mask, c.data.val_mask, c.data.test_mask)):
            assert torch.equal(mask, split[ids] == s)
    with pytest.raises(ConfigError, match="ships no split"):
        load_client_data(DataConfig(str(store_object(sbm())), "metis", 3, split_mode="official"), 0)


def test_graphs_with_float_targets_are_a_regression_set(tmp_path):
    from fgl_flower.datasets.resolve import dataset_task

    graphs = [
        Data(x=sbm(12, s).x, edge_index=sbm(12, s).edge_index, y=torch.tensor([0.5 * s]))
        for s in range(20)
    ]
    path = tmp_path / "reg.pt"
    torch.save(graphs, path)
    assert dataset_task("auto", str(path), {}).name == "graph-regression"
    c = load_client_data(DataConfig(str(path), "random", 2), 0)
    assert c.task == "graph-regression" and c.num_classes == 1
    assert all(g.y.dtype == torch.float32 for g in c.train + c.val + c.test)
    with pytest.raises(ConfigError, match="has real-valued targets: use task=graph-regression"):
        dataset_task("graph", str(path), {})


def test_a_csv_pair_runs_from_the_command_line(tmp_path, capsys):
    refs = write_sources(sbm(), tmp_path)
    code = main(
        [
            "run",
            "--inprocess",
            "--dataset",
            refs["csv"],
            "--partition",
            "random",
            "--clients",
            "2",
            "--rounds",
            "1",
            "--out",
            str(tmp_path / "run"),
        ]
    )
    assert code == 0 and "final" in capsys.readouterr().out
