"""Tasks: every method runs each task it declares and refuses the others in one line; link
prediction and graph regression equal a plain PyTorch loop on one client."""

import pytest
import torch
import torch.nn.functional as F

from fgl_flower.api import run
from fgl_flower.datasets import DataConfig, load_client_data
from fgl_flower.datasets.link_splits import edge_keys, sample_negatives
from fgl_flower.device import cpu_seeded, manual_seed
from fgl_flower.errors import ConfigError
from fgl_flower.launch import flat_config
from fgl_flower.link_metrics import link_metrics
from fgl_flower.methods import METHODS
from fgl_flower.models.registry import build_model
from fgl_flower.parse import parse_run_config
from fgl_flower.seeds import derive_seed
from fgl_flower.server_app import check_method_task
from fgl_flower.tasks import TASKS

#: A small dataset of each task (the node one: the app's synthetic graph).
DATA = {
    "node": {"dataset": "synthetic"},
    "link": {"dataset": "synthetic", "task": "link"},
    "graph": {"dataset": "synthetic-graphs", "partition": "random"},
    "graph-regression": {
        "dataset": "synthetic-graphs",
        "partition": "random",
        "data.synthetic-graphs.target": "regression",
    },
}
NEW_TASKS = ("link", "graph-regression")


def _config(method: str, data: str, **keys):
    """The parsed config of ``method`` on the small dataset of task ``data``, with ``keys``."""
    return parse_run_config(flat_config({"method": method, **DATA[data], **keys}))


def test_the_table_covers_every_task():
    assert set(DATA) == {name for name, _ in TASKS.items()}


@pytest.mark.parametrize("task", sorted(DATA))
@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_declares_a_task_or_refuses_it(method, task):
    spec = METHODS.get(method)
    if task in spec.tasks:
        check_method_task(_config(method, task))
        return
    with pytest.raises(ConfigError, match=rf"runs .* tasks, not {task} .* methods that run it:"):
        check_method_task(_config(method, task))


@pytest.mark.parametrize(
    "method,task",
    [(m, t) for t in NEW_TASKS for m in sorted(METHODS) if t in METHODS.get(m).tasks],
)
def test_every_method_runs_the_new_tasks_it_declares(method, task, tmp_path):
    extra = {"data.synthetic.num-nodes": 300} if task == "link" else {}
    res = run(
        method, **_flat(DATA[task]), clients=3, rounds=2, out=tmp_path, progress=False, **extra
    )
    metric = TASKS.get(task).select_by
    assert res.summary["best_val"]["selected_by"] == metric
    assert 0 <= res.final[metric.replace("val_", "test_")] < 1e6


def _flat(keys: dict) -> dict:
    """Run-config keys as :func:`run`'s keyword arguments (``data.*`` nested)."""
    out: dict = {}
    for k, v in keys.items():
        if k.startswith("data."):
            _, ds, opt = k.split(".")
            out.setdefault("data", {}).setdefault(ds, {})[opt] = v
        else:
            out[k] = v
    return out


def test_a_task_that_does_not_fit_the_data_is_refused():
    with pytest.raises(ConfigError, match="task=link learns on node-level data"):
        _config("fedavg", "graph", task="link")
    with pytest.raises(ConfigError, match="has class targets: use task=graph"):
        _config("fedavg", "graph", task="graph-regression")
    with pytest.raises(ConfigError, match="skews the classes"):
        load_client_data(
            DataConfig("synthetic-graphs", "dirichlet", 3, options=(("target", "regression"),)), 0
        )


def test_link_clients_never_pass_messages_over_held_out_edges(data_root):
    cfg = DataConfig("Cora", "louvain", 5, split=(0.8, 0.1, 0.1), task="link")
    for k in range(5):
        c = load_client_data(cfg, k)
        n, e = c.data.num_nodes, c.edges
        message = set(edge_keys(c.data.edge_index, n).tolist())
        held = [set(edge_keys(getattr(e, f"{s}_pos"), n).tolist()) for s in ("val", "test")]
        train = set(edge_keys(e.train_pos, n).tolist())
        assert message == train and not (message & held[0]) and not (message & held[1])
        assert not held[0] & held[1]


def test_link_prediction_equals_a_plain_loop_on_one_client(tmp_path):
    rounds, epochs, seed = 3, 3, 0
    res = run(
        "local",
        dataset="synthetic",
        task="link",
        partition="random",
        clients=1,
        rounds=rounds,
        local_epochs=epochs,
        seed=seed,
        out=tmp_path,
        progress=False,
        data={"synthetic": {"num-nodes": 200}},
    )
    cfg = DataConfig(
        "synthetic",
        "random",
        1,
        split=(0.8, 0.1, 0.1),
        split_seed=seed,
        options=(("num-nodes", 200),),
        task="link",
    )
    c = load_client_data(cfg, 0)
    g, e = c.data, c.edges
    with cpu_seeded(seed):  # the shared initial model: GCN encoder, dot-product decoder
        encoder = build_model("gcn", "node", c.num_features, 64, 64, 2, 0.5)
    opt = torch.optim.Adam(encoder.parameters(), lr=0.01, weight_decay=5e-4, fused=True)
    train_keys = edge_keys(e.train_pos, e.num_nodes)
    for rnd in range(1, rounds + 1):
        manual_seed(derive_seed(seed, 0, rnd, "train"), torch.device("cpu"))
        encoder.train()
        for _ in range(epochs):
            gen = torch.Generator().manual_seed(int(torch.randint(2**62, ())))
            neg = sample_negatives(e.num_nodes, train_keys, e.train_pos.size(1), gen)
            opt.zero_grad()
            z = encoder(g.x, g.edge_index)
            pos_s = (z[e.train_pos[0]] * z[e.train_pos[1]]).sum(-1)
            neg_s = (z[neg[0]] * z[neg[1]]).sum(-1)
            logits = torch.cat([pos_s, neg_s])
            labels = torch.cat([torch.ones_like(pos_s), torch.zeros_like(neg_s)])
            F.binary_cross_entropy_with_logits(logits, labels).backward()
            opt.step()
    encoder.eval()
    with torch.no_grad():
        z = encoder(g.x, g.edge_index)
        score = lambda p: (z[p[0]] * z[p[1]]).sum(-1)  # noqa: E731
        want = link_metrics(score(e.test_pos), score(e.test_neg))
    assert res.final["round"] == rounds
    assert res.final["test_auc"] == want["auc"] and res.final["test_ap"] == want["ap"]


def test_graph_regression_equals_a_plain_loop_on_one_client(tmp_path):
    from torch_geometric.loader import DataLoader

    rounds, epochs, seed = 2, 2, 0
    opts = {"num-graphs": 60, "target": "regression"}
    res = run(
        "local",
        dataset="synthetic-graphs",
        partition="random",
        clients=1,
        rounds=rounds,
        local_epochs=epochs,
        seed=seed,
        batch_size=16,
        out=tmp_path,
        progress=False,
        data={"synthetic-graphs": opts},
    )
    cfg = DataConfig(
        "synthetic-graphs",
        "random",
        1,
        split_seed=seed,
        options=tuple(sorted(opts.items())),
    )
    c = load_client_data(cfg, 0)
    assert c.task == "graph-regression" and c.num_classes == 1
    with cpu_seeded(seed):
        model = build_model("gin", "graph", c.num_features, 1, 64, 2, 0.5)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4, fused=True)
    for rnd in range(1, rounds + 1):
        manual_seed(derive_seed(seed, 0, rnd, "train"), torch.device("cpu"))
        model.train()
        for _ in range(epochs):
            for b in DataLoader(c.train, batch_size=16, shuffle=True):
                opt.zero_grad()
                F.mse_loss(model(b.x, b.edge_index, b.batch).view(-1), b.y.float()).backward()
                opt.step()
    model.eval()
    with torch.no_grad():
        b = next(iter(DataLoader(c.test, batch_size=len(c.test))))
        err = model(b.x, b.edge_index, b.batch).view(-1).double() - b.y.double()
    assert res.final["test_mse"] == pytest.approx(float((err**2).mean()), rel=1e-12, abs=0)
    assert res.final["test_mae"] == pytest.approx(float(err.abs().mean()), rel=1e-12, abs=0)


def test_training_non_edges_are_drawn_anew_or_fixed_as_asked():
    from fgl_flower.clients.learner import make_learner

    def learner(negatives: str):
        cfg = _config("fedavg", "link", **{"link-negatives": negatives})
        return make_learner(cfg, load_client_data(cfg.data_config(), 0))

    fresh, fixed = learner("resample"), learner("fixed")
    torch.manual_seed(0)
    assert not torch.equal(fresh.negatives(), fresh.negatives())
    first = fixed.negatives()
    assert torch.equal(first, fixed.negatives()) and torch.equal(
        first, learner("fixed").negatives()
    )
    train = set(edge_keys(fixed.data.edges.train_pos, fixed.data.edges.num_nodes).tolist())
    assert not train & set(edge_keys(first, fixed.data.edges.num_nodes).tolist())
