"""FedLoG client: the code's mini-batches, the pair graphs of generated neighbours, the
server's generators unpacked, and three rounds: pretraining and the first uploads, training
on the global synthetic nodes (the scaler moves), a last round that uploads nothing."""

import pytest
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from fgl_flower.clients.fedlog import PRETRAINED, FedLoGClient, batches, pair_graph
from fgl_flower.clients.state import ClientState
from fgl_flower.datasets import load_client_data
from fgl_flower.methods.fedlog import CLASS_GENERATORS, GENERATOR, GLOBAL, SYNTHETIC
from fgl_flower.parse import parse_run_config
from fgl_flower.protocol import ARRAYS, CONFIG, METRICS, SERVER_ROUND
from fgl_flower.records import record_torch, torch_record


def flat_parameters(state: dict) -> torch.Tensor:
    """A generator's state dict as one vector (state-dict order, as the server flattens it)."""
    return torch.cat([v.reshape(-1) for v in state.values()])


def test_batches_are_disjoint_full_size_and_drop_the_remainder():
    torch.manual_seed(0)
    parts = batches(10, 4)
    assert [len(b) for b in parts] == [4, 4] and len(set(torch.cat(parts).tolist())) == 8
    assert [len(b) for b in batches(3, 4)] == [3]


def test_pair_graph_joins_each_node_to_its_generated_neighbour():
    feats, edges = pair_graph(torch.tensor([[1.0], [2.0]]), torch.tensor([[10.0], [20.0]]))
    assert feats.view(-1).tolist() == [1.0, 10.0, 2.0, 20.0]
    assert sorted(map(tuple, edges.t().tolist())) == [(0, 1), (1, 0), (2, 3), (3, 2)]


def content(server_round: int, **records) -> RecordDict:
    return RecordDict({CONFIG: ConfigRecord({SERVER_ROUND: server_round}), **records})


def test_three_rounds(flat):
    flat.update(
        {
            "method": "fedlog",
            "model": "graphsage",
            "num-rounds": 3,
            "local-epochs": 2,
            "fedlog.num-proto": 2,
            "fedlog.gen-epochs": 2,
            "fedlog.gen-inits": 2,
            "fedlog.pre-epochs": 2,
            "fedlog.batch-size": 16,
            "fedlog.scaler-acc": -1.0,
        }
    )  # every class's scaler grows
    cfg = parse_run_config(flat)
    state = ClientState(RecordDict())
    data = load_client_data(cfg.data_config(), 0)
    client = FedLoGClient(cfg, data, state, 0)
    first = client.train(content(1, **{ARRAYS: ArrayRecord()}), 1)
    assert PRETRAINED in state and set(first) >= {ARRAYS, SYNTHETIC, GENERATOR}
    assert set(record_torch(first[ARRAYS])) == set(client.learner.get_shared())
    assert not any(k.startswith("syn_") for k in record_torch(first[ARRAYS]))
    assert first[METRICS]["probe.fedlog.cd-share"] == 0.0
    gen = record_torch(first[GENERATOR])
    # the server's per-class generators: here class c's is the client's own scaled by c + 1
    flat_gen = flat_parameters(gen)
    c = data.num_classes
    weights = torch.stack([flat_gen * (i + 1) for i in range(c)])
    k = cfg.option("num-proto")
    x = torch.randn(c * k, data.num_features)
    y = torch.arange(c).repeat_interleave(k)
    down = {
        ARRAYS: first[ARRAYS],
        GLOBAL: torch_record({"x": x, "y": y}),
        CLASS_GENERATORS: ArrayRecord({"weights": Array(weights.numpy())}),
    }
    gens = FedLoGClient(cfg, data, state, 0).class_generators(content(2, **down))
    assert torch.equal(flat_parameters(gens[2].state_dict()), flat_gen * 3)
    client = FedLoGClient(cfg, data, state, 0)  # rebuilt from its state, as the ClientApp does
    # the synthetic nodes trained in round 1 survive the rebuild
    assert torch.equal(
        client.learner.model.syn_head.detach(), record_torch(first[SYNTHETIC])["syn-head"]
    )
    second = client.train(content(2, **down), 2)
    assert second[METRICS]["probe.fedlog.cd-share"] > 0 and GENERATOR not in second
    steps = 2 * (int(data.data.train_mask.sum()) // 16)  # local epochs x batches
    assert second[METRICS]["probe.fedlog.scaler"] == pytest.approx(
        0.001 * steps
    )  # one step up a batch
    assert not torch.equal(
        record_torch(second[SYNTHETIC])["syn-head"], record_torch(first[SYNTHETIC])["syn-head"]
    )
    rebuilt = FedLoGClient(cfg, data, state, 0)
    assert torch.equal(rebuilt.scaler, client.scaler)  # the scaler survives the rebuild too
    last = rebuilt.train(content(3, **down), 3)
    assert len(last[ARRAYS]) == 0 and SYNTHETIC not in last and "test_acc" in last[METRICS]


def test_every_client_starts_the_same_generator_and_the_codes_generators_are_seeded(flat):
    """With no pretraining steps the uploaded generators of two clients are equal (the same
    seeded start); ``generators = official`` builds the same untrained ones on every client and
    ignores what the server sends."""
    flat.update(
        {
            "method": "fedlog",
            "model": "graphsage",
            "num-rounds": 2,
            "local-epochs": 1,
            "fedlog.num-proto": 2,
            "fedlog.gen-epochs": 0,
            "fedlog.pre-epochs": 1,
            "fedlog.generators": "official",
        }
    )
    cfg = parse_run_config(flat)
    ups, official = [], []
    for pid in (0, 1):
        client = FedLoGClient(
            cfg, load_client_data(cfg.data_config(), pid), ClientState(RecordDict()), pid
        )
        ups.append(record_torch(client.train(content(1, **{ARRAYS: ArrayRecord()}), 1)[GENERATOR]))
        official.append(client.class_generators(content(2)))
    assert all(torch.equal(ups[0][k], ups[1][k]) for k in ups[0])
    a, b = official
    assert all(
        torch.equal(flat_parameters(x.state_dict()), flat_parameters(y.state_dict()))
        for x, y in zip(a, b)
    )
    assert not torch.equal(flat_parameters(a[0].state_dict()), flat_parameters(a[1].state_dict()))
