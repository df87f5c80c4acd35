"""The server's checks of a reply, one function at a time (``strategies/screening.py``)."""

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord, MetricRecord

from fgl_flower.strategies.screening import (
    layout_of,
    layout_problem,
    majority,
    metric_problems,
    update_norm_problem,
    weight_problem,
)


def _record(**arrays):
    return ArrayRecord({k: Array(np.asarray(v)) for k, v in arrays.items()})


def test_layouts_compare_by_key_and_say_what_differs():
    want = layout_of(_record(w=np.zeros((2, 3), np.float32), b=np.zeros(3, np.float32)))
    assert (
        layout_problem(
            layout_of(_record(b=np.zeros(3, np.float32), w=np.zeros((2, 3), np.float32))), want
        )
        is None
    )
    assert (
        layout_problem(
            layout_of(_record(w=np.zeros((1, 1), np.float32), b=np.zeros(3, np.float32))), want
        )
        == "'w' has shape (1, 1), expected (2, 3)"
    )
    assert (
        layout_problem(
            layout_of(_record(w=np.zeros((2, 3), np.float64), b=np.zeros(3, np.float32))), want
        )
        == "'w' has dtype float64, expected float32"
    )
    assert (
        layout_problem(layout_of(_record(w=np.zeros((2, 3), np.float32))), want)
        == "missing key(s) 'b'"
    )


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        (1, True),
        (2**31 - 1, True),
        (0, False),
        (-1.99, False),
        (2.5, False),
        (2**31, False),
        (float("nan"), False),
    ],
)
def test_a_weight_is_a_whole_number_from_1_to_2_31_minus_1(value, ok):
    assert (weight_problem(MetricRecord({"num-examples": value})) is None) == ok


def test_metric_records_name_the_partition_and_keep_to_their_ranges():
    good = {
        "partition-id": 2,
        "val_acc": 0.5,
        "test_f1": 1.0,
        "val_loss": 3.0,
        "num-test": 10,
        "probe.x": -5.0,
    }
    assert metric_problems("metrics", MetricRecord(good), 2) is None
    assert metric_problems("metrics", MetricRecord(good), 1) == "metrics: no partition-id 1"
    assert "outside [0, 1]" in metric_problems(
        "metrics", MetricRecord({**good, "test_acc": 1.5}), 2
    )
    assert "is negative" in metric_problems("metrics", MetricRecord({**good, "val_loss": -1.0}), 2)
    assert (
        metric_problems("metrics", MetricRecord({**good, "contrast_loss": -1e-9}), 2) is None
    )  # a KL rounded
    assert "whole number" in metric_problems("metrics", MetricRecord({**good, "num-test": 2.5}), 2)
    assert (
        metric_problems("metrics", MetricRecord({**good, "val_acc": float("nan")}), 2) is None
    )  # on-nonfinite's


def test_an_honest_clipped_upload_passes_even_when_the_model_is_large():
    """The client clips in float64 and casts w0 + delta back to float32: on weights of size 1e4
    that moves an update of norm 1 by far more than a relative 1e-6 (the first version of this
    check refused honest clients of a DP run whose model the noise had grown)."""
    rng = np.random.default_rng(0)
    w0 = (rng.standard_normal(50_000) * 1e4).astype(np.float32)
    delta = rng.standard_normal(50_000)
    delta *= 1.0 / np.linalg.norm(delta)  # exactly the clip norm
    upload = (w0.astype(np.float64) + delta).astype(np.float32)
    assert np.linalg.norm(upload.astype(np.float64) - w0) > 1 + 1e-3  # the rounding lengthened it
    assert update_norm_problem(_record(w=upload), _record(w=w0), 1.0) is None
    unclipped = (w0.astype(np.float64) + 10 * delta).astype(np.float32)
    assert "it was not clipped" in update_norm_problem(_record(w=unclipped), _record(w=w0), 1.0)
    counter = update_norm_problem(
        _record(w=upload, n=np.array([4])), _record(w=w0, n=np.array([3])), 1.0
    )
    assert counter == "integer array(s) 'n' changed (a clipped upload keeps them)"


def test_a_majority_is_strict():
    assert (
        majority(["a", "a", "b"]) == "a" and majority(["a", "b"]) is None and majority([]) is None
    )
