"""FedStar, FedDense and GCFL through the ServerApp/ClientApp: what travels, the
personalized state, resource accounting and bad options."""

import numpy as np
import pytest
import torch
from methods_data import GRAPH_TASK
from run_records import rounds

from fgl_flower.client_app import make_app
from fgl_flower.errors import ConfigError
from fgl_flower.inprocess import InProcessGrid
from fgl_flower.parse import parse_run_config
from fgl_flower.protocol import ARRAYS
from fgl_flower.server_app import run


@pytest.fixture
def graph_flat(flat, data_root):
    flat.update(
        GRAPH_TASK,
        **{
            "data-root": str(data_root),
            "num-layers": 3,
            "hidden": 64,
            "lr": 0.001,
            "local-epochs": 1,
        },
    )
    return flat


def recording_mod(seen: list):
    """A ClientApp mod keeping every train reply's uploaded arrays."""

    def mod(msg, context, call_next):
        reply = call_next(msg, context)
        if msg.metadata.message_type == "train" and ARRAYS in reply.content:
            seen.append(reply.content[ARRAYS])
        return reply

    return mod


def run_recorded(flat):
    cfg = parse_run_config(flat)
    seen: list = []
    grid = InProcessGrid(flat, cfg.num_clients, client_app=make_app([recording_mod(seen)]))
    summary = run(grid, cfg)
    return summary, seen, grid


@pytest.mark.parametrize(
    "method,width,shared",
    [
        ("fedstar", None, 14592),
        ("feddense", 16, 2112 + 2 * 16**2 + 67 * 16),
        ("feddense", 32, 2112 + 2 * 32**2 + 67 * 32),
    ],
)
def test_only_the_structural_channel_travels(graph_flat, method, width, shared):
    graph_flat.update({"method": method, "num-rounds": 2})
    if width:
        graph_flat["feddense.width"] = width
    summary, uploads, grid = run_recorded(graph_flat)
    assert len(uploads) == 2 * 3
    for record in uploads:
        assert all(k.startswith("struct.") for k in record)
        assert sum(int(np.prod(a.shape)) for a in record.values()) == shared
        assert sum(len(a.data) for a in record.values()) >= 4 * shared
    res = summary["resources"]
    assert res["shared_params"] == shared and res["payload_kib"] == 4 * shared / 1024
    assert res["gflops"] > 0 and res["mp_gflops"] > 0 and set(res["clients"]) == {"0", "1", "2"}
    # the feature channel and the head stay personal: they differ between clients
    states = [grid.context(p).state["learner.model"].to_torch_state_dict() for p in range(3)]
    assert not torch.equal(states[0]["head.cls.weight"], states[1]["head.cls.weight"])


def test_fedavg_on_a_dataset_group_shares_only_the_gin_convolutions(flat, data_root):
    flat.update(
        {
            "method": "fedavg",
            "dataset": "tu-single",
            "partition": "per-dataset",
            "num-clients": 7,
            "num-rounds": 1,
            "model": "gin",
            "num-layers": 3,
            "split": "0.8,0.1,0.1",
            "split-mode": "stratified",
            "split-seed": 123,
            "data-root": str(data_root),
        }
    )
    summary, uploads, _ = run_recorded(flat)
    assert all(all(k.startswith("convs.") for k in r) for r in uploads)
    assert summary["resources"]["shared_params"] == 24960  # 97.5 KiB (spec §3.2)


def test_resources_are_reported_once_per_client_and_change_no_number(graph_flat, tmp_path):
    from fgl_flower.clients.learner import make_learner
    from fgl_flower.clients.resources import round_flops
    from fgl_flower.datasets import load_client_data

    graph_flat.update({"method": "feddense", "num-rounds": 3})
    run(InProcessGrid(graph_flat, 3), parse_run_config(graph_flat))
    records = rounds(tmp_path / "run")
    assert "resources" in records[0] and all("resources" not in r for r in records[1:])
    assert all(not any(k.startswith("res.") for k in r["train"]) for r in records)

    cfg = parse_run_config(graph_flat)
    learner = make_learner(cfg, load_client_data(cfg.data_config(), 0))
    before = {k: v.clone() for k, v in learner.model.state_dict().items()}
    rng = torch.get_rng_state()
    layers, message_passing = round_flops(learner, 1)
    assert layers > 0 and message_passing > 0
    assert torch.equal(torch.get_rng_state(), rng)
    assert all(torch.equal(before[k], v) for k, v in learner.model.state_dict().items())


@pytest.mark.parametrize(
    "update,match",
    [
        ({"method": "fedstar", "model": "gcn"}, "is for node-level|set model=gin"),
        ({"method": "feddense", "feddense.activation": "both"}, "feddense.activation"),
        ({"method": "feddense", "feddense.width": 0}, "feddense.width must be at least 1"),
        ({"method": "feddense", "feddense.d0": -1}, "feddense.d0"),
        ({"method": "gcfl", "gcfl.split-after": 0}, "gcfl.split-after"),
        ({"method": "gcfl", "gcfl.eps1": -1.0}, "non-negative"),
        ({"method": "fedstar", "fedprox.mu": 0.5}, "option of method 'fedprox'"),
        ({"method": "fedstar", "fedstar.feature-conv": "gcn"}, "use one of gin, acm"),
        ({"method": "fedstar", "fedstar.feature-conv": "acm"}, "for node tasks"),
    ],
)
def test_bad_options_stop_before_training(graph_flat, update, match):
    with pytest.raises(ConfigError, match=match):
        parse_run_config({**graph_flat, **update})


def test_graph_only_methods_refuse_node_datasets(flat):
    from fgl_flower.server_app import check_method_task

    flat.update({"method": "feddense", "model": "gin"})
    with pytest.raises(ConfigError, match="runs graph tasks, not node"):
        check_method_task(parse_run_config(flat))


def _ddcgnn(d):
    from fgl_flower.models.feddense import DDCGNN

    return DDCGNN(d.num_features, d.num_classes, width=8, num_layers=3, dropout=0.5)


def _fedstar_gin(d):
    from fgl_flower.models.fedstar import FedStarGIN

    return FedStarGIN(d.num_features, 64, d.num_classes, num_layers=3, dropout=0.5)


@pytest.mark.parametrize(
    "method,options,build",
    [
        ("feddense", {"feddense.width": 8}, _ddcgnn),
        ("fedstar", {}, _fedstar_gin),
    ],
)
def test_equals_a_plain_pytorch_reference_loop(graph_flat, tmp_path, method, options, build):
    """Spec §14 item 6: 3 clients, 3 rounds of FedDense (and FedStar) through Flower equal a
    plain loop (models seeded alike, persistent Adam, one epoch, struct.* averaged by training
    graphs, evaluation after the download) written without the package's client code."""
    import torch.nn.functional as F
    from torch_geometric.loader import DataLoader

    from fgl_flower.datasets import load_client_data
    from fgl_flower.datasets.encodings import attach_graph_inputs
    from fgl_flower.seeds import derive_seed

    graph_flat.update({"method": method, "num-rounds": 3, **options})
    run(InProcessGrid(graph_flat, 3), parse_run_config(graph_flat))
    ours = [r["clients"] for r in rounds(tmp_path / "run")]

    cfg = parse_run_config(graph_flat)
    data = [load_client_data(cfg.data_config(), k) for k in range(3)]
    models, optims = [], []
    for d in data:
        attach_graph_inputs(d, ["stc_enc"])
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cfg.seed)
            models.append(build(d))
        optims.append(torch.optim.Adam(models[-1].parameters(), lr=0.001, weight_decay=5e-4))

    def forward(model, b):
        return model(b.x, b.edge_index, b.batch, b.stc_enc)

    for rnd in range(1, 4):
        for k, (d, model, opt) in enumerate(zip(data, models, optims)):
            torch.manual_seed(derive_seed(cfg.seed, k, rnd, "train"))
            model.train()
            for b in DataLoader(d.train, batch_size=cfg.batch_size, shuffle=True):
                opt.zero_grad()
                F.cross_entropy(forward(model, b), b.y).backward()
                opt.step()
        sizes = [len(d.train) for d in data]
        shared = [k for k in models[0].state_dict() if k.startswith("struct.")]
        mean = {
            k: sum(
                (n / sum(sizes)) * m.state_dict()[k].double() for n, m in zip(sizes, models)
            ).float()
            for k in shared
        }
        for k, (d, model) in enumerate(zip(data, models)):
            model.load_state_dict(mean, strict=False)
            model.eval()
            with torch.no_grad():
                pred = torch.cat(
                    [forward(model, b).argmax(-1) for b in DataLoader(d.test, batch_size=128)]
                )
                y = torch.cat([b.y for b in DataLoader(d.test, batch_size=128)])
            assert float((pred == y).double().mean()) == pytest.approx(
                ours[rnd - 1][str(k)]["test_acc"]
            )
            loss = F.cross_entropy(
                torch.cat([forward(model, b) for b in DataLoader(d.test, batch_size=128)]), y
            )
            assert float(loss) == pytest.approx(ours[rnd - 1][str(k)]["test_loss"], rel=1e-4)


@pytest.mark.parametrize(
    "method,task,eval_dropout,options",
    [
        ("fedstar", "graph", False, {}),
        ("feddense", "graph", False, {}),
        ("fedstar", "node", False, {}),
        ("fedstar", "node", False, {"fedstar.feature-conv": "acm"}),
        ("feddense", "graph", True, {}),
    ],
)
def test_channel_probes_reach_the_round_records(
    flat, request, tmp_path, method, task, eval_dropout, options
):
    """``struct.norm``, ``feat.norm`` and ``head.dead`` of every client, every round, finite;
    on MUTAG (graph task, small models), on FedStar's node task (synthetic graph; also with
    ACM-GCN's layer in the feature channel), and with ``eval-dropout`` (an evaluation in train
    mode: the probes take their own eval-mode pass)."""
    import math

    from fgl_flower.methods import METHODS

    flat.update(
        {"method": method, "num-rounds": 2, "hidden": 16, "eval-dropout": eval_dropout, **options}
    )
    if task == "graph":
        flat.update(GRAPH_TASK, **{"data-root": str(request.getfixturevalue("data_root"))})
    if method == "feddense":
        flat.update({"feddense.width": 8, "feddense.head": 16})
    run(InProcessGrid(flat, 3), parse_run_config(flat))
    records = rounds(tmp_path / "run")
    names = {p.name for p in METHODS.get(method).probes}
    assert names == {"struct.norm", "feat.norm", "head.dead"}
    for record in records:
        probes = record["probes"]
        assert set(probes) == names
        for name in names:
            values = probes[name]["clients"]
            assert set(values) == {"0", "1", "2"} and all(math.isfinite(v) for v in values.values())
        assert all(0 <= v <= 1 for v in probes["head.dead"]["clients"].values())
        assert probes["struct.norm"]["min"] > 0 and probes["feat.norm"]["min"] > 0
        assert not any(k.startswith("probe.") for c in record["clients"].values() for k in c)
