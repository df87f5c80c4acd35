"""FedDEP's server is FedSage+'s exchange on FedDEP's records: in a generator round each
client gets the sum of the others' gradients under ``feddep.gradients`` and the round size
under ``feddep.clients``, nothing is averaged or evaluated; then FedAvg. Without the cross
term only the cross-gradient probe is idle in the generator rounds."""

import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict

from fgl_flower.methods.feddep import GRADIENTS, ROUND_CLIENTS
from fgl_flower.parse import parse_run_config
from fgl_flower.protocol import ARRAYS, CONFIG, METRICS, NUM_EXAMPLES, PARTITION_ID
from fgl_flower.records import record_torch
from fgl_flower.strategies.feddep import FedDEPStrategy


def reply(pid: int) -> Message:
    content = RecordDict(
        {
            ARRAYS: ArrayRecord(),
            METRICS: MetricRecord({PARTITION_ID: pid, NUM_EXAMPLES: 4.0, "gen_loss": 1.0}),
        }
    )
    return Message(content=content, dst_node_id=1, message_type=MessageType.TRAIN)


def strategy(flat, **options):
    flat.update({"method": "feddep", "model": "graphsage", "num-rounds": 5, **options})
    s = FedDEPStrategy(parse_run_config(flat))
    s.nodes = {0: 100, 1: 101, 2: 102}
    s.select([0, 1, 2])
    return s


def test_generator_rounds_carry_the_summed_gradients_under_feddeps_records(flat, messages):
    s = strategy(flat, **{"feddep.gen-rounds": 2})
    s._gradients = {1: torch.ones(2, 5, 3)}  # what prepare_round summed for client 1
    sent = s.configure_train(2, ArrayRecord(), ConfigRecord({}), None)
    by_node = {m.metadata.dst_node_id: m.content for m in sent}
    assert GRADIENTS not in by_node[100] and GRADIENTS not in by_node[102]
    assert torch.equal(record_torch(by_node[101][GRADIENTS])["grad"], torch.ones(2, 5, 3))
    assert all(c[CONFIG][ROUND_CLIENTS] == 3 for c in by_node.values())
    arrays, metrics = s.aggregate_train(2, [reply(0), reply(1), reply(2)])
    assert arrays is None and metrics["gen_loss"] == 1.0
    assert not s.evaluates(2) and s.evaluates(3) and s.uploads_model(3)
    assert s.idle_probes(1) == ("feddep.generated", "feddep.emb-effect")
    assert s.idle_probes(3) == ("feddep.cross-grad", "feddep.proto-gap")
    # a classifier round is FedAvg's
    assert all(
        GRADIENTS not in m.content
        for m in s.configure_train(3, ArrayRecord(), ConfigRecord({}), None)
    )


def test_without_the_cross_term_only_the_cross_probe_is_idle(flat):
    s = strategy(flat, **{"feddep.cross": False})
    assert s.idle_probes(1) == ("feddep.generated", "feddep.emb-effect", "feddep.cross-grad")
    sent = []
    s.prepare_round(1, ConfigRecord({}), lambda messages: sent.extend(messages) or [])
    assert sent == []  # no query: nothing crosses
