"""AdaFGL's server: FedAvg in step 1; in step 2 the extractor goes only to the clients that
lack it, an upload is refused, nothing is averaged, and who holds it is checkpointed."""

import torch
from flwr.app import ConfigRecord, Message, MessageType, MetricRecord, RecordDict

from fgl_flower.parse import parse_run_config
from fgl_flower.protocol import ARRAYS, METRICS, NUM_EXAMPLES, PARTITION_ID
from fgl_flower.records import torch_record
from fgl_flower.strategies.adafgl import AdaFGLStrategy


def reply(pid: int, arrays: dict) -> Message:
    content = RecordDict(
        {
            ARRAYS: torch_record(arrays),
            METRICS: MetricRecord({PARTITION_ID: pid, NUM_EXAMPLES: 4.0, "train_loss": 1.0}),
        }
    )
    return Message(content=content, dst_node_id=1, message_type=MessageType.TRAIN)


def test_the_extractor_goes_down_once_and_nothing_comes_up(flat, messages):
    flat.update({"method": "adafgl", "num-rounds": 5, "adafgl.fed-rounds": 2})
    s = AdaFGLStrategy(parse_run_config(flat))
    s.nodes = {0: 100, 1: 101}
    s.select([0, 1])
    extractor = torch_record({"w": torch.ones(3)})
    sizes = lambda sent: {m.metadata.dst_node_id: len(m.content[ARRAYS]) for m in sent}  # noqa: E731
    assert sizes(s.configure_train(2, extractor, ConfigRecord({}), None)) == {100: 1, 101: 1}
    # round 3, the first of step 2: both lack it; partition 0 replied, so round 4 skips it
    assert sizes(s.configure_train(3, extractor, ConfigRecord({}), None)) == {100: 1, 101: 1}
    arrays, metrics = s.aggregate_train(3, [reply(0, {})])
    assert arrays is None and metrics["train_loss"] == 1.0
    assert sizes(s.configure_train(4, extractor, ConfigRecord({}), None)) == {100: 0, 101: 1}
    assert sizes(s.configure_evaluate(4, extractor, ConfigRecord({}), None)) == {100: 0, 101: 1}
    # an upload in step 2 is a lie: refused
    sent = s.configure_train(4, extractor, ConfigRecord({}), None)
    refused = s.screen(4, sent, [reply(1, {"w": torch.zeros(3)})])
    assert "averages none" in refused[1]
    fresh = AdaFGLStrategy(parse_run_config(flat))
    fresh.restore(s.checkpoint_records(3, extractor, None))
    assert fresh.personalized == {0}
