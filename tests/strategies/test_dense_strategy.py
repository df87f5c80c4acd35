"""DENSE: its losses on hand-worked cases, the generator, one round end to end (what travels,
the probes) and the one-shot rule."""

import logging
import math

import pytest
import torch
from run_records import rounds

from fgl_flower.errors import ConfigError
from fgl_flower.inprocess import run_inprocess
from fgl_flower.models.dense import FeatureGenerator, adversarial_loss, kd_loss
from fgl_flower.parse import parse_run_config

SMALL = {
    "method": "dense",
    "num-rounds": 1,
    "dense.epochs": 3,
    "dense.g-steps": 3,
    "dense.num-gen": 16,
    "dense.topk": 3,
}


def test_kd_loss_by_hand():
    s, t = torch.tensor([[0.0, 0.0]]), torch.tensor([[2.0, 0.0]])
    # T = 2: teacher softmax(1, 0) = (e/(e+1), 1/(e+1)); student uniform; KL · T²
    p = torch.tensor([math.e / (math.e + 1), 1 / (math.e + 1)])
    expected = float((p * (p / 0.5).log()).sum()) * 4
    assert float(kd_loss(s, t, 2.0)) == pytest.approx(expected, rel=1e-6)
    assert float(kd_loss(t, t, 20.0)) == pytest.approx(0.0, abs=1e-7)


def test_adversarial_loss_counts_only_the_disagreeing_rows():
    t = torch.tensor([[3.0, 0.0], [3.0, 0.0]])
    s = torch.tensor([[1.0, 0.0], [0.0, 1.0]])  # row 0 agrees, row 1 disagrees
    p = torch.softmax(t[1], -1)
    kl = float((p * (p.log() - torch.log_softmax(s[1], -1))).sum())
    assert float(adversarial_loss(s, t)) == pytest.approx(-kl / 2, rel=1e-6)
    assert float(adversarial_loss(t, t)) == 0.0


def test_the_generator_resets_as_the_official_code_and_outputs_unit_interval():
    torch.manual_seed(0)
    g = FeatureGenerator(256, 40)
    g.reset()
    w = g.net[0].weight
    assert abs(float(w.std()) - 0.02) < 0.002 and float(g.net[0].bias.abs().max()) == 0.0
    x = g(torch.randn(64, 256))
    assert x.shape == (64, 40) and float(x.min()) > 0 and float(x.max()) < 1
    linear = FeatureGenerator(256, 40, "linear")  # FedTAD's head: unbounded, centred at the start
    linear.reset()
    x = linear(torch.randn(64, 256))
    assert float(x.min()) < 0 < float(x.max()) and abs(float(x.mean())) < 0.05


def test_an_unknown_generator_head_is_refused(flat):
    with pytest.raises(
        ConfigError, match=r"dense.generator-head='tanh': use one of sigmoid, linear"
    ):
        parse_run_config({**flat, **SMALL, "dense.generator-head": "tanh"})


def pool_of(n: int, size: int) -> list[dict]:
    """``n`` pooled graphs of ``size`` nodes; node ``i`` of graph ``e`` has feature ``100 e + i``
    and a ring as its graph."""
    ring = torch.stack([torch.arange(size), (torch.arange(size) + 1) % size])
    return [
        {
            "x": (100.0 * e + torch.arange(size, dtype=torch.float))[:, None],
            "edges": ring,
            "clients": torch.full((1, size, 2), float(e)),
            "targets": torch.zeros(size, dtype=torch.long),
        }
        for e in range(n)
    ]


def test_a_student_step_mixes_nodes_of_several_pooled_graphs():
    from fgl_flower.strategies.dense import student_batches

    pool = pool_of(5, 4)
    batches = list(student_batches(pool, 3, 4, torch.Generator().manual_seed(0)))
    assert len(batches) == 5  # as many steps as the pool holds graphs (the loader's len)
    for b in batches:
        graphs = sorted(int(v) // 100 for v in b["x"][::4, 0])
        assert len(set(graphs)) == 3 and b["x"].size(0) == 12  # the union of three graphs
        assert b["nodes"].numel() == 4 and int(b["nodes"].max()) < 12
        # edges stay inside their graph: a ring shifted by the graph's offset
        src, dst = b["edges"]
        assert torch.equal(src // 4, dst // 4)
        assert torch.equal(
            b["clients"][0, :, 0], b["x"][:, 0].div(100).floor()
        )  # logits follow their nodes
    assert len({tuple(b["x"][::4, 0].tolist()) for b in batches}) > 1  # different graphs per step


def test_the_official_batches_pass_over_every_pooled_node_once():
    from fgl_flower.strategies.dense import student_batches

    pool = pool_of(4, 3)
    seen = []
    for b in student_batches(pool, 0, 3, torch.Generator().manual_seed(1)):
        values = b["x"][b["nodes"], 0]
        seen += values.tolist()
        touched = {int(v) // 100 for v in values}
        assert {int(v) // 100 for v in b["x"][:, 0]} == touched  # the union of exactly those graphs
    assert sorted(seen) == sorted(float(100 * e + i) for e in range(4) for i in range(3))


def test_pool_probes_by_hand():
    """Pool-fit: the share of every pooled node that the ensemble (the clients' mean) puts in
    the class it was synthesised for, above chance; agreement: student against ensemble."""
    from fgl_flower.strategies.dense import DENSEStrategy

    def graph(teacher_classes, targets, student_classes):
        one_hot = torch.nn.functional.one_hot(torch.tensor(teacher_classes), 2).float()
        return {
            "x": torch.nn.functional.one_hot(torch.tensor(student_classes), 2).float(),
            "edges": None,
            "clients": torch.stack([one_hot, 3 * one_hot]),
            "targets": torch.tensor(targets),
        }

    pool = [
        graph([0, 0, 0, 0], [0, 0, 1, 1], [0, 0, 0, 1]),  # 2 of 4 hit; student agrees on 3
        graph([1, 1, 1, 1], [1, 1, 1, 1], [1, 0, 0, 1]),
    ]  # 4 of 4 hit; student agrees on 2
    strategy = DENSEStrategy.__new__(DENSEStrategy)
    probes = strategy.pool_probes(pool, lambda x, edges: x, 0.75, 2)
    assert probes == {"dense.teacher-fit": 0.5, "dense.pool-fit": 0.5, "dense.agreement": 5 / 8}

    class Student:  # hidden units: 0 positive on graph 0, 1 on graph 1, 2 never
        def __call__(self, x, edges):
            return x

        def embed(self, x, edges):
            first = float(x[0, 0] == 0)  # graph 0's first node is class 0 for the student
            return torch.tensor([[first, 1 - first, -1.0]]).expand(x.size(0), 3)

    assert strategy.pool_probes(pool, Student(), 0.75, 2)["dense.live-units"] == pytest.approx(
        2 / 3
    )


def test_one_round_sends_a_distilled_model_and_records_the_probes(flat, tmp_path, caplog):
    flat.update(SMALL, progress=True)
    with caplog.at_level(logging.INFO, logger="flwr"):
        summary = run_inprocess(flat)
    epochs = [
        r.getMessage().split(",")[0]
        for r in caplog.records
        if "distillation: epoch" in r.getMessage()
    ]
    assert epochs == [
        "dense distillation: epoch 1/3",
        "dense distillation: epoch 2/3",
        "dense distillation: epoch 3/3",
    ]
    rec = rounds(tmp_path / "run")[0]
    probes = rec["probes"]
    assert set(probes) == {
        "dense.teacher-fit",
        "dense.pool-fit",
        "dense.agreement",
        "dense.live-units",
    }
    assert 0 <= probes["dense.agreement"]["mean"] <= 1
    assert 0 < summary["final"]["test_acc"] <= 1
    # the student is a fresh model, not the clients' average: FedAvg's one round differs
    plain = {k: v for k, v in flat.items() if not k.startswith("dense.")}
    fedavg = run_inprocess({**plain, "method": "fedavg", "out-dir": str(tmp_path / "fedavg")})
    assert (
        fedavg["final"]["test_acc"] != summary["final"]["test_acc"]
        or fedavg["final"]["test_loss"] != summary["final"]["test_loss"]
    )


def test_dense_is_one_shot(flat):
    with pytest.raises(ConfigError, match="one-shot"):
        parse_run_config({**flat, **SMALL, "num-rounds": 2})
