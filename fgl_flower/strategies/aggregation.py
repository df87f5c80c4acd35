r"""Aggregation rules shared by strategies."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from flwr.app import Array, ArrayRecord

from fgl_flower.errors import FGLError
from fgl_flower.records import array_numpy, array_of


def weighted_mean_arrays(records: Sequence[ArrayRecord], weights: Sequence[float]) -> ArrayRecord:
    r"""Element-wise weighted mean of ``records`` (Eq. of FedAvg).

    .. math::
        \bar w = \sum_k \frac{n_k}{\sum_j n_j}\, w_k

    Accumulates in float64 in the given order and casts back to each array's dtype.
    All records must hold the same keys (in any order) and shapes.
    """
    if not records:
        raise FGLError("Nothing to aggregate: no client uploaded arrays.")
    total = float(sum(weights))
    if total <= 0:
        raise FGLError("Aggregation weights sum to zero (no client has training examples).")
    keys = list(records[0].keys())
    for r in records[1:]:
        if sorted(r.keys()) != sorted(keys):
            raise FGLError("Clients uploaded different parameter sets; cannot average them.")
    out: dict[str, Array] = {}
    for key in keys:
        first = array_numpy(records[0][key])
        acc = np.zeros(first.shape, dtype=np.float64)
        for r, w in zip(records, weights):
            acc += (float(w) / total) * array_numpy(r[key]).astype(np.float64)
        out[key] = array_of(acc.astype(first.dtype))
    return ArrayRecord(out)
