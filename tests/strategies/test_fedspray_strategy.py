"""FedSpray server: Eq. 15 proxy alignment and Eq. 14 encoder averaging."""

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict

from fgl_flower.app_defaults import load_app_defaults
from fgl_flower.errors import ConfigError, FGLError
from fgl_flower.parse import parse_run_config
from fgl_flower.strategies.fedspray import FedSprayStrategy, align_proxies


def test_align_proxies_is_class_ratio_weighted_mean_by_hand():
    # 3 clients, 3 classes, d_s = 2; class 2 appears on no client.
    proxies = np.array(
        [
            [[1.0, 2.0], [10.0, 10.0], [5.0, 5.0]],
            [[3.0, 4.0], [0.0, 0.0], [7.0, 7.0]],
            [[0.0, 0.0], [20.0, 40.0], [9.0, 9.0]],
        ],
        dtype=np.float32,
    )
    ratios = np.array([[0.75, 0.25, 0.0], [0.5, 0.0, 0.0], [0.0, 1.0, 0.0]])
    previous = np.full((3, 2), -1.0, dtype=np.float32)
    out = align_proxies(proxies, ratios, previous)
    # class 0: (0.75*[1,2] + 0.5*[3,4]) / 1.25 ; class 1: (0.25*[10,10] + 1*[20,40]) / 1.25
    np.testing.assert_allclose(
        out[0], [(0.75 * 1 + 0.5 * 3) / 1.25, (0.75 * 2 + 0.5 * 4) / 1.25], rtol=1e-6
    )
    np.testing.assert_allclose(out[1], [(2.5 + 20) / 1.25, (2.5 + 40) / 1.25], rtol=1e-6)
    np.testing.assert_array_equal(out[2], [-1.0, -1.0])  # nobody has class 2: kept
    assert out.dtype == np.float32


def test_align_proxies_rejects_mismatched_shapes():
    with pytest.raises(FGLError, match="shapes"):
        align_proxies(np.zeros((2, 3, 4)), np.zeros((2, 2)), np.zeros((3, 4), np.float32))


def _reply(pid, n, encoder, S, ratio):
    return Message(
        content=RecordDict(
            {
                "arrays": ArrayRecord(
                    {k: Array(np.asarray(v, np.float32)) for k, v in encoder.items()}
                ),
                "proxies": ArrayRecord(
                    {
                        "S": Array(np.asarray(S, np.float32)),
                        "class-ratio": Array(np.asarray(ratio, np.float32)),
                    }
                ),
                "metrics": MetricRecord(
                    {"partition-id": pid, "num-examples": float(n), "train_loss": 1.0}
                ),
            }
        ),
        dst_node_id=1,
        message_type="train",
    )


def _strategy(**options):
    flat = load_app_defaults()
    flat.update({"method": "fedspray", **{f"fedspray.{k}": v for k, v in options.items()}})
    return FedSprayStrategy(parse_run_config(flat))


def test_aggregate_train_encoder_by_node_counts_and_proxies_by_class_ratio(messages):
    strategy = _strategy()
    replies = [
        _reply(0, 30, {"w": [[1.0, 0.0]]}, [[1.0, 1.0], [0.0, 0.0]], [1.0, 0.0]),
        _reply(1, 10, {"w": [[5.0, 4.0]]}, [[3.0, 3.0], [8.0, 6.0]], [0.5, 0.5]),
    ]
    encoder, metrics = strategy.aggregate_train(1, replies)
    np.testing.assert_allclose(encoder["w"].numpy(), [[(30 * 1 + 10 * 5) / 40, 10 * 4 / 40]])
    np.testing.assert_allclose(strategy.proxies, [[(1 + 0.5 * 3) / 1.5] * 2, [8.0, 6.0]], rtol=1e-6)
    assert metrics["train_loss"] == 1.0
    # Round 2 sends the aligned proxies next to the encoder.
    strategy.node_ids = [7, 8]
    msgs = list(strategy.configure_train(2, encoder, ConfigRecord(), None))
    assert len(msgs) == 2
    np.testing.assert_allclose(msgs[0].content["proxies"]["S"].numpy(), strategy.proxies)


def test_zero_proxies_ablation_never_aggregates_proxies(messages):
    strategy = _strategy(**{"zero-proxies": True})
    replies = [_reply(0, 3, {"w": [[1.0]]}, [[9.0]], [1.0])]
    strategy.aggregate_train(1, replies)
    assert strategy.proxies is None


@pytest.mark.parametrize(
    "key,value,match",
    [
        ("variant", "bogus", "variant"),
        ("confidence", 1.5, "confidence"),
        ("proxy-dim", 0, "proxy-dim"),
    ],
)
def test_bad_options_fail_when_parsing_the_config(key, value, match):
    flat = load_app_defaults()
    flat.update({"method": "fedspray", f"fedspray.{key}": value})
    with pytest.raises(ConfigError, match=match):
        parse_run_config(flat)


def test_lambda1_default_depends_on_variant():
    from fgl_flower.methods.fedspray import FedSprayOptions

    flat = load_app_defaults()
    flat["method"] = "fedspray"
    assert FedSprayOptions.from_config(parse_run_config(flat)).lambda1 == 1.0
    flat["fedspray.variant"] = "paper"
    assert FedSprayOptions.from_config(parse_run_config(flat)).lambda1 == 5.0
    flat["fedspray.lambda1"] = 0.5
    assert FedSprayOptions.from_config(parse_run_config(flat)).lambda1 == 0.5
