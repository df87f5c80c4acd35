"""SecAgg+ on a message-level grid: what the server receives is masked, its sum is the sum,
clients lost after sharing their keys are recovered from the others' shares, and a client
never gives both secrets of one node."""

import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, RecordDict

from fgl_flower.app_defaults import load_app_defaults
from fgl_flower.errors import FGLError
from fgl_flower.inprocess import InProcessGrid
from fgl_flower.secagg.client import secaggplus_mod
from fgl_flower.secagg.encoding import encode
from fgl_flower.secagg.protocol import ACTIVE, DEAD, MASKED, SECAGG, STAGE, THRESHOLD
from fgl_flower.secagg.server import SecAggPlusSettings, ring_neighbours, secure_sum

BITS = 32


class Federation:
    """Nodes 11, 12, ... each holding a record ``stats``; ``lost`` nodes stop answering from
    the stage named for them on."""

    def __init__(self, n, lost=None):
        InProcessGrid(load_app_defaults(), 1)  # messages need the task identity a grid sets
        g = torch.Generator().manual_seed(n)
        self.values = {
            10 + i: {
                "s1": torch.randn(3, 4, generator=g, dtype=torch.float64) * 10,
                "cnt": torch.randint(0, 50, (3,), generator=g).double(),
            }
            for i in range(1, n + 1)
        }
        self.contexts = {
            nid: Context(
                run_id=0,
                node_id=nid,
                node_config={"partition-id": nid - 11},
                state=RecordDict(),
                run_config={},
            )
            for nid in self.values
        }
        self.lost = lost or {}
        self.received = []  # every reply the server got

    def handler(self, msg, context):
        return Message(
            RecordDict(
                {
                    "stats": ArrayRecord(self.values[msg.metadata.dst_node_id]),
                    "config": ConfigRecord({"partition-id": msg.metadata.dst_node_id - 11}),
                }
            ),
            reply_to=msg,
        )

    def send(self, messages):
        replies = []
        for m in messages:
            stage = m.content[SECAGG][STAGE]
            if stage in self.lost.get(m.metadata.dst_node_id, ()):
                continue
            replies.append(secaggplus_mod(m, self.contexts[m.metadata.dst_node_id], self.handler))
        self.received += replies
        return replies

    def run(self, shares=0):
        return secure_sum(
            self.send,
            sorted(self.values),
            RecordDict(),
            "stats",
            "stats",
            SecAggPlusSettings(shares, BITS),
            seed=0,
        )

    def clear(self, nodes):
        return {k: sum(self.values[n][k] for n in nodes) for k in ("s1", "cnt")}


def close(total, clear, clients):
    for k in clear:
        assert (total[k] - clear[k]).abs().max() <= clients * 2.0 ** -(BITS + 1)


def test_the_server_receives_masked_vectors_and_rebuilds_only_their_sum():
    fed = Federation(5)
    result = fed.run()
    close(result.total, fed.clear(fed.values), 5)
    assert result.summed == sorted(fed.values) and result.dropped == []
    for reply in result.replies:  # the collect replies: the record is one masked vector
        nid = reply.metadata.src_node_id
        masked = reply.content["stats"][MASKED].numpy()
        own = encode(fed.values[nid], BITS, 5)
        assert list(reply.content["stats"].keys()) == [MASKED]
        assert masked.shape == own.shape and (masked != own).mean() > 0.99
    # no reply to the server holds a client's values in any record
    for reply in fed.received:
        for record in reply.content.values():
            if isinstance(record, ArrayRecord):
                assert set(record.keys()) <= {MASKED}


def test_a_client_lost_after_sharing_its_keys_is_left_out_and_its_masks_removed():
    fed = Federation(5, lost={13: ("collect", "unmask")})
    result = fed.run()
    assert result.dropped == [13] and 13 not in result.summed
    close(result.total, fed.clear([n for n in fed.values if n != 13]), 4)


def test_secagg_plus_ring_with_three_shares_each():
    ring = ring_neighbours(list(range(7)), 3, seed=0)
    assert all(len(v) == 3 and k in v for k, v in ring.items())
    fed = Federation(7, lost={15: ("collect", "unmask")})
    result = fed.run(shares=3)
    assert result.dropped == [15]
    close(result.total, fed.clear([n for n in fed.values if n != 15]), 6)


def test_too_many_lost_clients_stop_with_a_clear_message():
    fed = Federation(3, lost={12: ("collect", "unmask"), 13: ("collect", "unmask")})
    with pytest.raises(FGLError, match="below the threshold"):
        fed.run()


class Stop(Exception):
    pass


def test_a_client_never_gives_the_seed_and_the_key_of_one_node():
    """A server that claims node 12 both sent its vector and dropped would get its seed and
    its key, hence its vector: the client refuses. After unmask its secrets are gone."""
    fed = Federation(3)

    def until_unmask(messages):
        if messages[0].content[SECAGG][STAGE] == "unmask":
            raise Stop
        return fed.send(messages)

    with pytest.raises(Stop):
        secure_sum(
            until_unmask,
            sorted(fed.values),
            RecordDict(),
            "stats",
            "stats",
            SecAggPlusSettings(0, BITS),
            0,
        )
    bad = Message(
        RecordDict({SECAGG: ConfigRecord({STAGE: "unmask", ACTIVE: [11, 12], DEAD: [12]})}),
        dst_node_id=11,
        message_type="query.secagg",
    )
    with pytest.raises(FGLError, match="seed and its key"):
        secaggplus_mod(bad, fed.contexts[11], fed.handler)
    good = Message(
        RecordDict({SECAGG: ConfigRecord({STAGE: "unmask", ACTIVE: [11, 12, 13], DEAD: []})}),
        dst_node_id=11,
        message_type="query.secagg",
    )
    secaggplus_mod(good, fed.contexts[11], fed.handler)
    assert "fgl.secagg" not in fed.contexts[11].state


def test_a_client_answers_each_stage_once_and_in_order():
    """A server that sent a second collect would get two uploads under the same masks (their
    difference is the difference of the vectors): the client refuses."""
    fed = Federation(3)
    seen = []

    def until_unmask(messages):
        if messages[0].content[SECAGG][STAGE] == "unmask":
            raise Stop
        if messages[0].content[SECAGG][STAGE] == "collect":
            seen.extend(messages)
        return fed.send(messages)

    with pytest.raises(Stop):
        secure_sum(
            until_unmask,
            sorted(fed.values),
            RecordDict(),
            "stats",
            "stats",
            SecAggPlusSettings(0, BITS),
            0,
        )
    again = seen[0]
    with pytest.raises(FGLError, match="out of order"):
        secaggplus_mod(
            Message(
                again.content, dst_node_id=again.metadata.dst_node_id, message_type="query.secagg"
            ),
            fed.contexts[again.metadata.dst_node_id],
            fed.handler,
        )


def test_a_threshold_below_a_majority_is_refused():
    """With a threshold of one, every share is the secret itself."""
    fed = Federation(3)

    def low_threshold(messages):
        if messages[0].content[SECAGG][STAGE] == "share-keys":
            for m in messages:
                m.content[SECAGG][THRESHOLD] = 1
        return fed.send(messages)

    with pytest.raises(FGLError, match="needs a majority"):
        secure_sum(
            low_threshold,
            sorted(fed.values),
            RecordDict(),
            "stats",
            "stats",
            SecAggPlusSettings(0, BITS),
            0,
        )


def test_secagg_plus_neighbourhoods_grow_logarithmically():
    from fgl_flower.secagg.server import default_shares

    assert [default_shares(n) for n in (2, 3, 9, 10, 100, 1000)] == [2, 3, 9, 9, 15, 21]
    ring = ring_neighbours(list(range(100)), 0, seed=1)
    assert {len(v) for v in ring.values()} == {15}
    assert all(sum(i in v for v in ring.values()) == 15 for i in range(100))  # each in 15 rings
