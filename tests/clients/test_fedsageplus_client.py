"""FedSage+ client and server together, driven message by message: a generator step is the
gradient of the joint objective written out centrally (the cross term's sign and 1/M), and
the classifier loss reaches the feature head only over two-way edges."""

import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, RecordDict
from torch_geometric.utils import to_undirected

import fgl_flower.clients.fedsageplus as client_module
from fgl_flower.app_defaults import load_app_defaults
from fgl_flower.clients.fedsageplus import GENERATOR, FedSagePlusClient
from fgl_flower.clients.state import ClientState
from fgl_flower.datasets import load_client_data
from fgl_flower.inprocess import InProcessGrid
from fgl_flower.models.fedsage import feature_loss, sample_targets
from fgl_flower.parse import parse_run_config
from fgl_flower.seeds import derive_seed
from fgl_flower.strategies.fedsageplus import FedSagePlusStrategy

ROUND = 1


def make(**options):
    flat = load_app_defaults()
    flat.update(
        {
            "method": "fedsageplus",
            "model": "graphsage",
            "num-clients": 3,
            "num-rounds": 3,
            "data.synthetic.num-nodes": 300,
            "fedsageplus.gen-rounds": 2,
            "fedsageplus.pretrain-epochs": 2,
            "fedsageplus.hidden-portion": 0.8,
            "fedsageplus.loss-feat": 2.0,
            **options,
        }
    )
    cfg = parse_run_config(flat)
    clients = {
        p: FedSagePlusClient(
            cfg, load_client_data(cfg.data_config(), p), ClientState(RecordDict()), p
        )
        for p in range(cfg.num_clients)
    }
    for c in clients.values():  # pre-trained, and every node predicting two lost neighbours
        model = c.generator()
        c.pretrain(model)
        with torch.no_grad():
            model.gen.dgen.bias.add_(2.0)
        c.state.save_module(GENERATOR, model)
    InProcessGrid(flat, 1)  # messages need the task identity a grid sets
    strategy = FedSagePlusStrategy(cfg)
    strategy.nodes = {p: 100 + p for p in clients}
    strategy.select(sorted(clients))
    return cfg, clients, strategy


def send_to(clients):
    """The grid: each query message answered by the client of its node."""

    def send(messages):
        return [
            Message(
                content=clients[m.metadata.dst_node_id - 100].query(
                    m.metadata.message_type.split(".", 1)[1], m.content
                ),
                dst_node_id=0,
                message_type="query",
            )
            for m in messages
        ]

    return send


def central_gradient(cfg, clients, i, params_of):
    """The gradient of (1/M)[a L_d + b L_f + c L_c + b sum_{j != i} L_f^(i<-j)] for client
    i's parameters, each other client's term against targets drawn from its own subgraph."""
    me, opts = clients[i], clients[i].opts
    model = me.generator()
    out = me.generate(model, ROUND)
    own, _ = me.generator_loss(model, out)
    imp = me.impaired()
    train = imp["train"]
    pred_count, feats = out[0][train], out[1][train]
    cross = 0.0
    for j, other in clients.items():
        if j == i:
            continue
        g = other.original.data
        draws = torch.Generator().manual_seed(derive_seed(cfg.seed, j, ROUND, i, "fedsage-cross"))
        targets = sample_targets(
            g.x,
            to_undirected(g.edge_index, num_nodes=g.num_nodes),
            feats.size(0),
            opts.num_pred,
            draws,
        )
        cross = cross + feature_loss(feats, targets, pred_count, imp["count"][train], opts.matching)
    total = (own + opts.loss_feat * cross) / len(clients)
    params = params_of(model)
    return dict(
        zip([n for n, _ in params], torch.autograd.grad(total, [p for _, p in params]))
    ), cross


@pytest.mark.parametrize("trainable", ["fgen", "all"])
def test_a_generator_step_is_the_gradient_of_the_joint_objective(trainable, monkeypatch):
    cfg, clients, strategy = make(**{"fedsageplus.trainable": trainable})

    def params_of(model):
        named = (
            model.named_parameters()
            if trainable == "all"
            else model.gen.fgen.named_parameters(prefix="gen.fgen")
        )
        return list(named)

    expected = {}
    for i in clients:
        expected[i], cross = central_gradient(cfg, clients, i, params_of)
        assert cross.item() > 0  # the other clients' feature losses are in play
    config = ConfigRecord({})
    strategy.prepare_round(ROUND, config, send_to(clients))
    # a step of plain gradient descent with rate 1: the update is minus the gradient
    monkeypatch.setattr(
        client_module, "make_adam", lambda params, lr, wd: torch.optim.SGD(params, lr=1.0)
    )
    for message in strategy.configure_train(ROUND, ArrayRecord(), config, None):
        i = message.metadata.dst_node_id - 100
        before = {n: p.detach().clone() for n, p in params_of(clients[i].generator())}
        clients[i].train(message.content, ROUND)
        after = dict(params_of(clients[i].generator()))
        for name, grad in expected[i].items():
            torch.testing.assert_close(
                before[name] - after[name].detach(), grad, rtol=1e-4, atol=1e-7
            )


def classifier_grad_on_features(undirected: bool) -> float:
    _, clients, _ = make(
        **{
            "fedsageplus.loss-count": 0.0,
            "fedsageplus.loss-feat": 0.0,
            "fedsageplus.undirected": undirected,
        }
    )
    client = clients[0]
    model = client.generator()
    out = client.generate(model, ROUND)
    loss, parts = client.generator_loss(model, out)
    assert parts["gen_cls_loss"] > 0
    return float(torch.autograd.grad(loss, out[1])[0].norm())


def test_the_classifier_loss_reaches_the_feature_head_over_two_way_edges():
    assert classifier_grad_on_features(undirected=True) > 1e-6
    # OpenFGL's one-way edges: the generated nodes send no message, L_c gives them no gradient
    assert classifier_grad_on_features(undirected=False) == 0.0
