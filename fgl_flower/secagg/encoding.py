r"""Fixed-point encoding of float arrays for modular (masked) summation.

A value :math:`v` becomes the integer :math:`\mathrm{round}(v\,2^F) \bmod 2^{B}` (``F``
fraction bits, modulus ``2^B`` with ``B = 62``), so the modular sum of the encodings of
``K`` clients decodes to :math:`\sum_k v_k` with an error of at most :math:`K\,2^{-F-1}` per
element, as long as every partial sum stays within :math:`\pm 2^{B-1-F}`. Rounding is to the
nearest integer (deterministic: the same inputs give the same sum in every run), unlike
Flower's stochastic quantisation, whose ``int32`` range is also too narrow for sums of
squared features.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import torch
from torch import Tensor

from fgl_flower.errors import FGLError

#: Bits of the modulus: masks and encodings live in ``[0, 2^MOD_BITS)``; ``int64`` sums of two
#: such values never overflow.
MOD_BITS = 62
MODULUS = 1 << MOD_BITS

Layout = list[tuple[str, tuple[int, ...]]]


def layout_of(arrays: Mapping[str, Tensor]) -> Layout:
    """The keys (sorted) and shapes of ``arrays``: what the flat vector holds, in order."""
    return [(k, tuple(arrays[k].shape)) for k in sorted(arrays)]


def encode(arrays: Mapping[str, Tensor], fraction_bits: int, clients: int) -> np.ndarray:
    """``int64 [sum of sizes]``: ``arrays`` flattened in :func:`layout_of` order and encoded.

    Raises :class:`FGLError` when ``clients`` copies of the largest value could leave the
    range the modulus holds (the sum would wrap around)."""
    flat = np.concatenate(
        [arrays[k].detach().double().cpu().reshape(-1).numpy() for k, _ in layout_of(arrays)]
    )
    if not np.isfinite(flat).all():
        raise FGLError("Secure aggregation: a value to sum is NaN or infinite.")
    limit = 2.0 ** (MOD_BITS - 1 - fraction_bits)
    largest = float(np.abs(flat).max()) if flat.size else 0.0
    if largest * clients >= limit:
        raise FGLError(
            f"Secure aggregation: a value of magnitude {largest:.4g} summed over {clients} clients "
            f"leaves the fixed-point range ±{limit:.4g} of {fraction_bits} fraction bits. O-pFGL: set "
            f"opfgl.secagg-fraction-bits to at most "
            f"{max(0, MOD_BITS - 2 - math.ceil(math.log2(largest * clients)))}; a model's weights "
            "(32 fraction bits, summed as n_k * w_k): use agg-weight=uniform or fewer clients per round."
        )
    return np.mod(np.rint(flat * 2.0**fraction_bits).astype(np.int64), MODULUS)


def decode(total: np.ndarray, layout: Layout, fraction_bits: int) -> dict[str, Tensor]:
    """The float64 arrays of a modular sum of :func:`encode` vectors (``total`` in
    ``[0, 2^MOD_BITS)``): the upper half of the range holds negative sums."""
    signed = (
        np.where(total >= MODULUS // 2, total - MODULUS, total).astype(np.float64)
        / 2.0**fraction_bits
    )
    out, start = {}, 0
    for key, shape in layout:
        size = math.prod(shape)
        out[key] = torch.from_numpy(signed[start : start + size].reshape(shape).copy())
        start += size
    if start != total.size:
        raise FGLError(f"Secure aggregation: a sum of {total.size} values for a layout of {start}.")
    return out
