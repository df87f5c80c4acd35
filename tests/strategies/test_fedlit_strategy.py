"""FedLit's server: the greedy type matching, the per-type averages over aligned client types
(untrained types left out), the centres, what each client receives, and the official code's
indexing as a variant."""

import pytest
import torch
from flwr.app import ArrayRecord, Message, MessageType, MetricRecord, RecordDict

from fgl_flower.methods.fedlit import CENTROIDS
from fgl_flower.parse import parse_run_config
from fgl_flower.protocol import ARRAYS, METRICS, NUM_EXAMPLES, PARTITION_ID
from fgl_flower.records import record_torch, torch_record
from fgl_flower.strategies.fedlit import FedLitStrategy, match_types

E = torch.eye(3)


def test_greedy_matching_takes_the_most_similar_pair_first():
    centers = torch.tensor([[1.0, 0.0], [0.6, 0.8]])
    # type 0 is closest to centre 1 (0.96), type 1 to centre 0 (1.0): the best pair goes first
    centroids = torch.tensor([[0.8, 0.6], [1.0, 0.0]])
    assert match_types(centroids, centers).tolist() == [1, 0]
    assert match_types(E[[1, 2, 0]], E).tolist() == [1, 2, 0]  # a rotation is found exactly
    # greedy is neither the best total (Hungarian: [1, 0], 1.0 against 0.65) nor a per-type
    # argmax ([0, 0]): the best pair (type 0, centre 0) is fixed first
    t0, t1 = [0.6, 0.5, 0.39**0.5], [0.5, 0.05, 0.7475**0.5]
    assert match_types(torch.tensor([t0, t1]), E[:2]).tolist() == [0, 1]


def reply(
    pid: int,
    centroids: torch.Tensor,
    channels: list[float],
    feature: float,
    n: float,
    counts: list[float],
) -> Message:
    arrays = {
        "feature1.weight": torch.tensor([feature]),
        "classifier.weight": torch.tensor([feature]),
    }
    arrays.update({f"channels.{k}.proj.weight": torch.tensor([w]) for k, w in enumerate(channels)})
    arrays["centroids"] = centroids
    content = RecordDict(
        {
            ARRAYS: torch_record(arrays),
            METRICS: MetricRecord({PARTITION_ID: pid, NUM_EXAMPLES: n}),
            CENTROIDS: torch_record({"train-counts": torch.tensor(counts, dtype=torch.float64)}),
        }
    )
    return Message(content=content, dst_node_id=1, message_type=MessageType.TRAIN)


def strategy(flat, alignment="matched") -> FedLitStrategy:
    flat.update(
        {"method": "fedlit", "num-clients": 8, "fedlit.num-types": 3, "fedlit.alignment": alignment}
    )
    return FedLitStrategy(parse_run_config(flat))


def channels(models: ArrayRecord, owner: str = "global") -> list[float]:
    t = record_torch(models)
    return [float(t[f"{owner}.channels.{k}.proj.weight"][0]) for k in range(3)]


# client 0 defines the groups; client 1's types are client 0's rotated: its type k sits at
# centre (k + 1) mod 3
A = (0, E, [1.0, 2.0, 3.0], 1.0, 1.0, [5, 5, 5])
B = (1, E[[1, 2, 0]], [10.0, 20.0, 30.0], 3.0, 3.0, [5, 5, 5])


def test_each_global_channel_averages_the_client_types_matched_to_it(flat, messages):
    s = strategy(flat)
    models, _ = s.aggregate_train(1, [reply(*A), reply(*B)])
    # centre 0 <- B's type 2 (30), centre 1 <- B's type 0 (10), centre 2 <- B's type 1 (20)
    assert channels(models) == [15.5, 6.0, 11.5]
    t = record_torch(models)
    assert float(t["global.feature1.weight"][0]) == pytest.approx(
        2.5
    )  # weighted by the sizes 1 : 3
    assert torch.allclose(t["global.centroids"], E)  # both clients' matched centroids coincide
    assert t["client1.alignment"].tolist() == [1, 2, 0]
    # client 1 receives, for its type k, the channel and centre of global type (k + 1) mod 3
    mine = record_torch(s.model_for(models, 1))
    assert [float(mine[f"channels.{k}.proj.weight"][0]) for k in range(3)] == [6.0, 11.5, 15.5]
    assert torch.equal(mine["centroids"], E[[1, 2, 0]])
    assert "alignment" not in mine and not any(k.startswith("global.") for k in mine)
    assert s.server_probes(1) == {"fedlit.center-cos": pytest.approx(1.0), "fedlit.permuted": 0.5}


def test_a_type_without_training_nodes_is_left_out_of_its_average(flat, messages):
    s = strategy(flat)
    s.aggregate_train(1, [reply(*A), reply(*B)])
    untrained = (*B[:5], [0, 5, 5])  # B's type 0 (matched to centre 1) holds no training node
    models, _ = s.aggregate_train(2, [reply(*A), reply(*untrained)])
    assert channels(models) == [15.5, 2.0, 11.5]


def test_a_global_type_without_a_trained_member_keeps_its_channel(flat, messages):
    s = strategy(flat)
    s.aggregate_train(1, [reply(*A), reply(*B)])  # channels [15.5, 6.0, 11.5]
    # nobody trains global type 1: A's type 1 and B's type 0 hold no training node
    a, b = (*A[:5], [5, 0, 5]), (*B[:2], [50.0, 60.0, 70.0], *B[3:5], [0, 5, 5])
    models, _ = s.aggregate_train(2, [reply(*a), reply(*b)])
    assert channels(models) == [(1.0 + 70.0) / 2, 6.0, (3.0 + 60.0) / 2]


def test_round_one_falls_back_to_the_initial_channel_the_clients_started_from(flat, messages):
    from fgl_flower.device import cpu_seeded
    from fgl_flower.models.fedlit import build_fedlit

    flat.update({"method": "fedlit", "num-clients": 2, "hidden": 4, "fedlit.num-types": 2})
    cfg = parse_run_config(flat)
    with cpu_seeded(cfg.seed):
        start = build_fedlit(
            3, 2, 4, 2, cfg.num_layers, cfg.dropout, 1, cfg.seed, cfg.model_init
        ).state_dict()
    uploads = []
    for pid in range(
        2
    ):  # trained copies of the seeded model; type 1 holds no training node anywhere
        sd = {k: v + 1.0 + pid for k, v in start.items() if k != "initialized"}
        sd["centroids"] = torch.eye(2, 8)
        uploads.append(
            Message(
                content=RecordDict(
                    {
                        ARRAYS: torch_record(sd),
                        METRICS: MetricRecord({PARTITION_ID: pid, NUM_EXAMPLES: 1.0}),
                        CENTROIDS: torch_record(
                            {"train-counts": torch.tensor([3.0, 0.0], dtype=torch.float64)}
                        ),
                    }
                ),
                dst_node_id=1,
                message_type=MessageType.TRAIN,
            )
        )
    models = record_torch(FedLitStrategy(cfg).aggregate_train(1, uploads)[0])
    for key in (k for k in start if k.startswith("channels.1.")):
        assert torch.equal(models[f"global.{key}"], start[key])
    for key in (k for k in start if k.startswith("channels.0.")):
        assert torch.allclose(models[f"global.{key}"], start[key] + 1.5)


def test_an_unaligned_client_gets_the_global_order_and_an_absent_one_keeps_its_alignment(
    flat, messages
):
    s = strategy(flat)
    s.aggregate_train(1, [reply(*A), reply(*B)])
    models, _ = s.aggregate_train(2, [reply(*A)])  # client 1 not sampled
    assert record_torch(models)["client1.alignment"].tolist() == [1, 2, 0]
    fresh = record_torch(s.model_for(models, 7))  # never trained: no alignment yet
    assert [float(fresh[f"channels.{k}.proj.weight"][0]) for k in range(3)] == channels(models)
    assert torch.equal(fresh["centroids"], record_torch(models)["global.centroids"])


def test_official_alignment_swaps_the_indices_and_sends_the_last_clients(flat, messages):
    s = strategy(flat, "official")
    models, _ = s.aggregate_train(1, [reply(*A), reply(*B)])
    # the code stores B's match [1, 2, 0] as its inverse [2, 0, 1]: type k joins group inv[k]
    assert channels(models) == [10.5, 16.0, 6.5]
    t = record_torch(models)
    assert t["client0.alignment"].tolist() == t["client1.alignment"].tolist() == [2, 0, 1]


def test_before_any_aggregation_clients_get_nothing(flat, messages):
    assert len(strategy(flat).model_for(ArrayRecord(), 0)) == 0
