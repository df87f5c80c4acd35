import numpy as np
import pytest
from flwr.app import Array, ArrayRecord

from fgl_flower.errors import FGLError
from fgl_flower.strategies.aggregation import weighted_mean_arrays


def rec(**arrays):
    return ArrayRecord({k: Array(np.asarray(v, dtype=np.float32)) for k, v in arrays.items()})


def test_weighted_mean_by_hand():
    a = rec(w=[[1.0, 2.0]], b=[0.0])
    b = rec(w=[[3.0, 6.0]], b=[4.0])
    out = weighted_mean_arrays([a, b], [1, 3])
    np.testing.assert_allclose(out["w"].numpy(), [[2.5, 5.0]])  # (1*1 + 3*3)/4, (2 + 18)/4
    np.testing.assert_allclose(out["b"].numpy(), [3.0])
    assert out["w"].numpy().dtype == np.float32


def test_mismatched_keys_fail():
    with pytest.raises(FGLError):
        weighted_mean_arrays([rec(w=[1.0]), rec(v=[1.0])], [1, 1])


def test_zero_weights_fail():
    with pytest.raises(FGLError):
        weighted_mean_arrays([rec(w=[1.0])], [0])
