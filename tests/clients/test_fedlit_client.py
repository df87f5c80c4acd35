"""FedLit client: the per-type training-node counts on a hand-worked graph, and a round that
trains the whole model (the projection included) on the E-M step's types and uploads the
model, its centroids and the counts."""

import torch
from flwr.app import ArrayRecord, ConfigRecord, RecordDict

from fgl_flower.clients.fedlit import FedLitClient, train_counts
from fgl_flower.clients.state import ClientState
from fgl_flower.datasets import load_client_data
from fgl_flower.methods.fedlit import CENTROIDS
from fgl_flower.parse import parse_run_config
from fgl_flower.protocol import ARRAYS, CONFIG, SERVER_ROUND
from fgl_flower.records import record_torch


def test_train_counts_count_the_training_nodes_on_each_types_edges():
    # path 0 - 1 - 2 - 3 (both directions): edge 0-1 type 0, 1-2 type 1, 2-3 type 0
    edges = torch.tensor([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]])
    types = torch.tensor([0, 0, 1, 1, 0, 0])
    train = torch.tensor([True, False, True, False])
    # type 0 touches 0, 1, 2, 3 (training: 0, 2); type 1 touches 1, 2 (training: 2); type 2 none
    assert train_counts(types, edges, train, 3).tolist() == [2.0, 1.0, 0.0]


def test_a_round_trains_everything_on_the_em_types_and_uploads_model_centroids_counts(flat):
    flat.update({"method": "fedlit", "local-epochs": 3})
    cfg = parse_run_config(flat)
    client = FedLitClient(cfg, load_client_data(cfg.data_config(), 0), ClientState(RecordDict()), 0)
    model = client.learner.model
    start = {k: v.clone() for k, v in model.state_dict().items()}
    em, used = [], []
    em_step, classify = model.em_step, model.classify
    model.em_step = lambda h, e: em.append(em_step(h, e)) or em[-1]
    model.classify = lambda h, e, t: used.append(t) or classify(h, e, t)
    reply = client.train(
        RecordDict({ARRAYS: ArrayRecord(), CONFIG: ConfigRecord({SERVER_ROUND: 1})}), 1
    )
    assert len(em) == 3 and all(
        a is b for a, b in zip(em, used)
    )  # each epoch trains on its E-M types
    assert not torch.equal(model.feature1.weight, start["feature1.weight"])  # the projection learns
    assert not torch.equal(model.centroids, start["centroids"]) and bool(model.initialized)
    up = record_torch(reply[ARRAYS])
    assert set(up) == {k for k in start if k != "initialized"}
    g = client.data.data
    counts = record_torch(reply[CENTROIDS])["train-counts"]
    assert torch.equal(counts, train_counts(em[-1], g.edge_index, g.train_mask, model.num_types))
    assert 0 < counts.max() <= g.train_mask.sum()
