"""The attack suite: one client of three lies in its train reply (``fgl_flower.attacks``);
the server refuses the reply and names the client, the honest clients' run completes as if
that client had failed, and under DP the global model moves at most the clipping norm per
round, whatever the liar says."""

import math

import numpy as np
import pytest
from faults import fail_partition
from flwr.app import ArrayRecord, Context, Message, MessageType
from methods_data import NEEDS
from run_records import rounds

from fgl_flower import attacks
from fgl_flower.client_app import make_app
from fgl_flower.errors import FGLError
from fgl_flower.inprocess import InProcessGrid
from fgl_flower.parse import parse_run_config
from fgl_flower.protocol import ARRAYS, START
from fgl_flower.records import get_record
from fgl_flower.server_app import run

LIAR = 2

#: attack -> what the server's refusal says
PROTOCOL_ATTACKS = {
    "nan arrays": (attacks.nonfinite(float("nan")), "NaN"),
    "inf arrays": (attacks.nonfinite(float("inf")), "infinite"),
    "a (1, 1) array, which would broadcast": (
        attacks.reshaped((1, 1)),
        "has shape (1, 1), expected",
    ),
    "a larger shape": (attacks.reshaped((64, 64)), "has shape (64, 64), expected"),
    "an extra key": (attacks.extra_key(), "unexpected key(s) 'extra.weight'"),
    "a missing key": (attacks.missing_key(), "missing key(s)"),
    "a huge array": (attacks.huge(), "has shape (20000000,), expected"),
    "a negative weight": (attacks.weight(-1.99), "num-examples=-1.99 is not a whole number"),
    "a zero weight": (attacks.weight(0), "num-examples=0 is not a whole number"),
    "a huge weight": (attacks.weight(1e12), "num-examples=1e+12 is not a whole number"),
    "a NaN weight": (attacks.weight(float("nan")), "num-examples=nan is not a whole number"),
    "another client's partition": (
        attacks.claim_partition(0),
        "claims partition 0, but its node serves partition 2",
    ),
    "a partition that does not exist": (attacks.claim_partition(99), "claims partition 99"),
    "a partition id that is not a number": (
        lambda msg, reply: reply.content["metrics"].__setitem__("partition-id", float("nan")),
        "names a partition-id that is not a whole number",
    ),
}


def _run(flat, *mods):
    cfg = parse_run_config(flat)
    return run(InProcessGrid(flat, cfg.num_clients, client_app=make_app(list(mods))), cfg)


def _honest_part(recs):
    return [
        {k: r.get(k) for k in ("round", "train", "eval", "clients", "eval_clients")} for r in recs
    ]


@pytest.mark.parametrize("attack", list(PROTOCOL_ATTACKS))
def test_a_lying_reply_is_refused_named_and_the_run_goes_on_as_without_the_liar(
    flat, tmp_path, attack
):
    rewrite, why = PROTOCOL_ATTACKS[attack]
    flat.update({"method": "fedavg", "num-rounds": 3, "accept-failures": 1})
    _run({**flat, "out-dir": str(tmp_path / "failed")}, fail_partition(LIAR, {1, 2, 3}))
    summary = _run(flat, attacks.malicious([LIAR], rewrite))
    recs = rounds(tmp_path / "run")
    for r in recs:
        assert list(r["failures"]) == [str(LIAR)]
        assert r["failures"][str(LIAR)].startswith("refused: ") and why in r["failures"][str(LIAR)]
    # a refused client is a failed client: the honest clients' numbers are the same
    assert _honest_part(recs) == _honest_part(rounds(tmp_path / "failed"))
    assert summary["failures"] == {
        str(LIAR): {
            "rounds": 3,
            "refused": 3,
            "last": f"round 3: {recs[-1]['failures'][str(LIAR)]}",
        }
    }


def test_the_run_summary_names_the_refused_client(flat, tmp_path, capsys):
    from fgl_flower.cli import print_summary

    flat.update({"method": "fedavg", "num-rounds": 2, "accept-failures": 1})
    summary = _run(flat, attacks.malicious([LIAR], attacks.nonfinite()))
    print_summary(summary, tmp_path / "run")
    assert (
        "client 2 failed in 2 round(s), refused in 2; last: round 2: refused: arrays/"
        in capsys.readouterr().out
    )


def test_without_accept_failures_a_lying_reply_stops_the_run_naming_it(flat):
    from fgl_flower.strategies.grid import ClientFailure

    flat.update({"method": "fedavg", "num-rounds": 2})
    with pytest.raises(
        ClientFailure, match=r"partition 2: refused: arrays: '.*' has shape \(1, 1\)"
    ):
        _run(flat, attacks.malicious([LIAR], attacks.reshaped((1, 1))))


def test_a_claimed_partition_does_not_replace_the_honest_clients_record(flat, tmp_path):
    flat.update({"method": "fedavg", "num-rounds": 2, "accept-failures": 1})
    _run({**flat, "out-dir": str(tmp_path / "failed")}, fail_partition(LIAR, {1, 2}))
    _run(flat, attacks.malicious([LIAR], attacks.claim_partition(0)))
    ours, theirs = rounds(tmp_path / "run"), rounds(tmp_path / "failed")
    assert [r["clients"]["0"] for r in ours] == [r["clients"]["0"] for r in theirs]


@pytest.mark.parametrize("method", ["gcfl", "fedpub"])
@pytest.mark.parametrize(
    ("rewrite", "why"),
    [
        (attacks.claim_partition(0), "claims partition 0"),
        (attacks.reshaped((1, 1)), "has shape (1, 1), expected"),
    ],
)
def test_servers_with_a_model_per_client_refuse_claims_and_other_layouts(
    flat, tmp_path, method, rewrite, why
):
    """GCFL and FED-PUB key server state by partition and send each client its own model:
    a claimed partition is refused, and so is an upload that is not in its model's layout."""
    flat.update({"method": method, "num-rounds": 2, "accept-failures": 1})
    _run(flat, attacks.malicious([LIAR], rewrite))
    assert all(why in r["failures"][str(LIAR)] for r in rounds(tmp_path / "run"))


class Recorder:
    """A client mod on an honest partition that keeps every global model it receives (and
    round 1's start, which it sends back under DP)."""

    def __init__(self, partition: int = 0) -> None:
        self.partition, self.models = partition, {}

    def __call__(self, msg: Message, context: Context, call_next) -> Message:
        reply = call_next(msg, context)
        if (
            msg.metadata.message_type == MessageType.TRAIN
            and int(context.node_config["partition-id"]) == self.partition
        ):
            rnd = int(msg.content["config"]["server-round"])
            received = get_record(msg.content, ARRAYS, ArrayRecord)
            if received is not None and len(received):
                self.models[rnd - 1] = received
            elif (start := get_record(reply.content, START, ArrayRecord)) is not None:
                self.models[0] = start
        return reply

    def moves(self) -> list[float]:
        """The L2 distance between the global models of consecutive rounds."""
        out = []
        for r in sorted(self.models)[1:]:
            a, b = self.models[r - 1], self.models[r]
            out.append(
                math.sqrt(
                    sum(
                        ((b[k].numpy().astype(np.float64) - a[k].numpy()) ** 2).sum()
                        for k in a.keys()
                    )
                )
            )
        return out


def _dp(flat, clip=1.0):
    return {
        **flat,
        "method": "fedavg",
        "agg-weight": "uniform",
        "fedavg.dp-clip": clip,
        "num-rounds": 4,
        "lr": 0.5,
        "accept-failures": 1,
    }


@pytest.mark.parametrize("attack", ["weight", "unclipped"])
def test_under_dp_the_global_model_moves_at_most_the_clip_norm_whatever_a_client_says(
    flat, tmp_path, attack
):
    """The outside review's attack: one client of three reports num-examples = -1.99 under
    dp-clip = 1 without noise; the old server weighed the honest updates by 1 / (2 - 1.99) =
    100 and the model moved by 207 in a round. Also: a client that does not clip."""
    rewrite = attacks.weight(-1.99) if attack == "weight" else attacks.scaled(100.0)
    recorder = Recorder()
    _run(_dp(flat), recorder, attacks.malicious([LIAR], rewrite))
    moves = recorder.moves()
    assert len(moves) == 3 and all(0 < m <= 1.0 * (1 + 1e-5) for m in moves), moves
    recs = rounds(tmp_path / "run")
    why = "is not a whole number" if attack == "weight" else "it was not clipped"
    assert all(why in r["failures"][str(LIAR)] for r in recs)
    assert all(r["dp"]["released"] and r["dp"]["clients"] == 2 for r in recs[1:])


def test_under_dp_a_client_with_another_start_model_is_refused_in_round_1(flat, tmp_path):
    def other_start(msg, reply):
        start = reply.content[START]
        reply.content[START] = ArrayRecord({k: type(a)(a.numpy() + 1) for k, a in start.items()})

    _run(_dp(flat), attacks.malicious([LIAR], other_start, rounds={1}))
    recs = rounds(tmp_path / "run")
    assert "start model (round 1's w0) differs" in recs[0]["failures"][str(LIAR)]
    assert "failures" not in recs[1]


def _secure(flat, **more):
    return {
        **flat,
        "method": "fedavg",
        "fedavg.secure-aggregation": True,
        "num-rounds": 3,
        "accept-failures": 1,
        **more,
    }


def test_a_masked_vector_of_the_wrong_length_is_refused_and_the_sum_goes_on(flat, tmp_path):
    _run({**_secure(flat), "out-dir": str(tmp_path / "failed")}, fail_partition(LIAR, {1, 2, 3}))
    _run(_secure(flat), attacks.malicious([LIAR], attacks.masked_length(1)))
    recs = rounds(tmp_path / "run")
    assert all("masked vector is int64" in r["failures"][str(LIAR)] for r in recs)
    for ours, theirs in zip(recs, rounds(tmp_path / "failed")):
        assert ours["eval"] == pytest.approx(theirs["eval"], rel=1e-5, abs=1e-7)


def test_a_masked_weight_other_than_the_clear_one_makes_the_round_keep_its_model(flat, tmp_path):
    """Under size weights the clear count of each summed client must add up to the masked
    weight; a client that masks one count and reports another leaves the round unusable: it
    keeps the model it started from (round 1, with nothing to keep, stops the run)."""
    _run(_secure(flat), attacks.malicious([LIAR], attacks.weight(7), rounds={2}))
    recs = rounds(tmp_path / "run")
    assert "refused_sum" not in recs[0] and "refused_sum" not in recs[2]
    assert "masked weights sum to" in recs[1]["refused_sum"]
    with pytest.raises(FGLError, match="none to keep"):
        _run(
            {**_secure(flat), "out-dir": str(tmp_path / "r1")},
            attacks.malicious([LIAR], attacks.weight(7)),
        )


def test_under_uniform_weights_a_clear_weight_lie_moves_nothing(flat, tmp_path):
    """The server weighs every reply 1 under agg-weight = uniform: a client's word for its
    size (here a valid count, so not refused) changes no number."""
    flat.update({"method": "fedavg", "num-rounds": 2, "agg-weight": "uniform"})
    _run({**flat, "out-dir": str(tmp_path / "honest")})
    _run(flat, attacks.malicious([LIAR], attacks.weight(1000)))
    assert [r["eval"] for r in rounds(tmp_path / "run")] == [
        r["eval"] for r in rounds(tmp_path / "honest")
    ]
    assert all("failures" not in r for r in rounds(tmp_path / "run"))


def test_under_secagg_and_dp_an_unclipped_client_makes_the_round_release_nothing(flat, tmp_path):
    flat = _secure(_dp(flat), **{"num-rounds": 3})
    recorder = Recorder()
    _run(
        flat,
        recorder,
        attacks.own_settings([LIAR], {"fedavg.dp-clip": 1e12, "lr": 50.0}, rounds={2}),
    )
    recs = rounds(tmp_path / "run")
    assert [r["dp"]["released"] for r in recs] == [True, False, True]
    assert "did not clip" in recs[1]["refused_sum"] and "did not clip" in recs[1]["dp"]["withheld"]
    moves = recorder.moves()
    assert moves[1] == 0.0 and all(m <= 1 + 1e-5 for m in moves)


def _flip_shares(msg, reply):
    """An unmask reply whose every share has one bit flipped."""
    from fgl_flower.secagg.protocol import SECAGG, SHARES, STAGE

    if str(msg.content[SECAGG][STAGE]) == "unmask":
        fields = reply.content[SECAGG]
        fields[SHARES] = [s[:4] + bytes([s[4] ^ 1]) + s[5:] for s in fields[SHARES]]


def _drop_keys(msg, reply):
    """A setup reply without its public keys."""
    from fgl_flower.secagg.protocol import PUBLIC_KEY_1, SECAGG, STAGE

    if str(msg.content[SECAGG][STAGE]) == "setup":
        del reply.content[SECAGG][PUBLIC_KEY_1]


def test_wrong_unmask_shares_are_found_named_and_the_sum_stays_right(flat, tmp_path):
    """Each secret is checked when rebuilt (a mask seed against the commitment its owner
    sent, a dropped client's key against its public key); a share that does not fit is
    found among the others and left out. Before, one client flipping a bit of its shares
    froze the model for the whole run without being named."""
    flat = _secure(flat)
    _run({**flat, "out-dir": str(tmp_path / "honest")})
    _run(flat, attacks.malicious([LIAR], _flip_shares, message_type="query.secagg"))
    recs = rounds(tmp_path / "run")
    assert all("share of node" in r["secagg_refused"][str(LIAR)] for r in recs)
    assert [r["eval"] for r in recs] == [r["eval"] for r in rounds(tmp_path / "honest")]


def test_a_malformed_protocol_reply_leaves_its_client_out_of_the_round(flat, tmp_path):
    _run(_secure(flat), attacks.malicious([LIAR], _drop_keys, message_type="query.secagg"))
    recs = rounds(tmp_path / "run")
    assert all(r["secagg_refused"] == {str(LIAR): "setup: no public keys"} for r in recs)
    # it was never asked to train, so its evaluation (which rides in the next train message) is missing
    assert all(LIAR not in r["eval_clients"] for r in recs[:-1])


def _set(record, key, value):
    """A rewrite: ``record/key`` of the reply set to ``value`` (an array or a metric)."""

    def rewrite(msg, reply):
        target = reply.content[record]
        if isinstance(target, ArrayRecord):
            target[key] = type(next(iter(target.values())))(np.asarray(value))
        else:
            target[key] = value

    return rewrite


def _drop(record, key):
    def rewrite(msg, reply):
        del reply.content[record][key]

    return rewrite


def _scaled(record, factor):
    """A rewrite: every array of the reply's ``record`` multiplied by ``factor``."""

    def rewrite(msg, reply):
        target = reply.content[record]
        for key, array in list(target.items()):
            target[key] = type(array)(array.numpy() * np.float32(factor))

    return rewrite


def _bad_bytes(data):
    """The first array of the upload with ``data`` for its bytes (a parser's worst case)."""
    from flwr.app import Array

    def rewrite(msg, reply):
        arrays = reply.content[ARRAYS]
        key, first = next(iter(arrays.items()))
        arrays[key] = Array(
            dtype=first.dtype, shape=tuple(first.shape), stype=first.stype, data=data
        )

    return rewrite


#: (method, attack, what the refusal says): the checks the second outside review asked for
RECORD_ATTACKS = {
    "truncated array bytes": ("fedavg", _bad_bytes(b"\x93NUMPY\x01"), "is unreadable as float32"),
    "zip bytes": ("fedavg", _bad_bytes(b"PK\x03\x04" + bytes(60)), "is unreadable as float32"),
    "no partition id in the metrics": (
        "fedavg",
        _drop("metrics", "partition-id"),
        "metrics: no partition-id 2",
    ),
    "a metric that is a list": (
        "fedavg",
        _set("metrics", "train_loss", [1.0, 2.0]),
        "train_loss is not a number",
    ),
    "an accuracy above 1": (
        "fedavg",
        _set("evaluation", "test_acc", 1e6),
        "test_acc=1e+06 outside [0, 1]",
    ),
    "FedNova's step count": (
        "fednova",
        _set("metrics", "fednova.steps", 1e9),
        "but this run takes 3 local steps",
    ),
    "SCAFFOLD's step count": (
        "scaffold",
        _set("metrics", "scaffold.steps", 1.0),
        "but this run takes 3 local steps",
    ),
    "SCAFFOLD's control update, not its own model's": (
        "scaffold",
        _scaled("scaffold.delta-control", 100.0),
        "scaffold.delta-control: differs from (x - y)/(K lr) - c of its own upload",
    ),
    "FedSpray's class ratios": (
        "fedspray",
        _set("proxies", "class-ratio", np.full(4, 1e30, np.float32)),
        "class-ratio are not shares of one whole",
    ),
    "FedLoG's class rates missing": (
        "fedlog",
        _drop("fedlog.synthetic", "class-rate"),
        "fedlog.synthetic: missing key(s) 'class-rate'",
    ),
    "FedGTA's confidence": (
        "fedgta",
        _set("fedgta.statistics", "confidence", np.array([-5.0], np.float32)),
        "confidence below 0",
    ),
}


@pytest.mark.parametrize("attack", list(RECORD_ATTACKS))
def test_method_records_and_metrics_are_screened(flat, tmp_path, attack):
    method, rewrite, why = RECORD_ATTACKS[attack]
    flat.update({"method": method, **NEEDS.get(method, {}), "num-rounds": 3, "accept-failures": 1})
    _run(flat, attacks.malicious([LIAR], rewrite, rounds={2}))
    recs = rounds(tmp_path / "run")
    assert "failures" not in recs[0] and why in recs[1]["failures"][str(LIAR)], recs[1].get(
        "failures"
    )
