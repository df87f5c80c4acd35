"""Fixed-point encoding for masked sums: round trip, negative sums, the range check."""

import numpy as np
import pytest
import torch

from fgl_flower.errors import FGLError
from fgl_flower.secagg.encoding import MODULUS, decode, encode, layout_of


def test_the_modular_sum_of_encodings_decodes_to_the_sum():
    g = torch.Generator().manual_seed(0)
    clients = [
        {
            "a": torch.randn(3, 4, generator=g, dtype=torch.float64) * 100,
            "b": torch.randn(5, generator=g, dtype=torch.float64),
        }
        for _ in range(6)
    ]
    total = np.zeros(17, dtype=np.int64)
    for c in clients:
        total = np.mod(total + encode(c, 32, len(clients)), MODULUS)
    out = decode(total, layout_of(clients[0]), 32)
    for key in ("a", "b"):
        clear = sum(c[key] for c in clients)
        assert out[key].shape == clear.shape
        assert (out[key] - clear).abs().max() <= len(clients) * 2.0**-33  # half a step per client
    assert out["a"].min() < 0  # negative sums come back negative


def test_values_that_could_wrap_around_are_refused_with_what_to_set():
    with pytest.raises(FGLError, match="secagg-fraction-bits to at most 16"):
        encode({"x": torch.tensor([1e12])}, 32, 10)
    with pytest.raises(FGLError, match="NaN"):
        encode({"x": torch.tensor([float("nan")])}, 32, 2)
