r"""Robust aggregation rules for the FedAvg family (run option ``aggregation``).

Each rule combines the :math:`n` uploads :math:`w_1, \dots, w_n` of a round into the
global model, tolerating up to :math:`f` (``malicious-clients``) uploads that are
arbitrary. The rules are Flower's own (``flwr.server.strategy.aggregate``, the functions
behind its ``FedMedian``, ``FedTrimmedAvg``, ``Krum`` and ``MultiKrum`` strategies), applied
to this project's records in partition-id order:

- ``mean``: :math:`\sum_k \frac{n_k}{\sum_j n_j} w_k`, FedAvg's weighted mean (float64
  accumulation, :func:`~fgl_flower.strategies.aggregation.weighted_mean_arrays`);
- ``median``: the coordinate-wise median (Yin et al., ICML 2018);
- ``trimmed-mean``: per coordinate, the mean of the values left after cutting the
  :math:`f` largest and the :math:`f` smallest (Yin et al.); needs :math:`n > 2f`;
- ``krum``: the upload whose :math:`n - f - 2` nearest uploads are nearest in summed squared
  L2 distance (Blanchard et al., NeurIPS 2017);
- ``multi-krum``: the mean of the :math:`n - f` uploads with the best Krum scores
  (unweighted, as Blanchard et al.'s; Flower's ``MultiKrum`` weighs them by size).

The robust rules ignore the weights, so a client's claimed size buys it nothing; each array
comes back in its own dtype. Their sizes (:func:`needed`) are checked before a run starts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from flwr.app import ArrayRecord

from fgl_flower.errors import FGLError
from fgl_flower.records import array_numpy, array_of
from fgl_flower.strategies.aggregation import weighted_mean_arrays

#: The rules, in the order ``aggregation`` lists them.
RULES = ("mean", "median", "trimmed-mean", "krum", "multi-krum")


def _as_lists(records: Sequence[ArrayRecord]) -> tuple[list[str], list[list[np.ndarray]]]:
    keys = list(records[0].keys())
    return keys, [[array_numpy(r[k]) for k in keys] for r in records]


def _record(keys: list[str], arrays: Sequence[np.ndarray], like: ArrayRecord) -> ArrayRecord:
    return ArrayRecord(
        {
            k: array_of(np.asarray(a).astype(array_numpy(like[k]).dtype))
            for k, a in zip(keys, arrays)
        }
    )


def _median(records, weights, f):
    from flwr.server.strategy.aggregate import aggregate_median

    keys, lists = _as_lists(records)
    return _record(keys, aggregate_median([(w, 1) for w in lists]), records[0])


def _trimmed_mean(records, weights, f):
    from flwr.server.strategy.aggregate import aggregate_trimmed_avg

    n = len(records)
    if n <= 2 * f:
        raise FGLError(
            f"trimmed-mean cuts malicious-clients={f} uploads from each end: it needs more "
            f"than {2 * f} of them, this round has {n}."
        )
    keys, lists = _as_lists(records)
    # Flower cuts int(proportion * n) from each end: (f + 1/2) / n gives exactly f
    return _record(keys, aggregate_trimmed_avg([(w, 1) for w in lists], (f + 0.5) / n), records[0])


def _krum_scores(records, f) -> np.ndarray:
    """Krum's score of each upload: summed squared distance to its ``n - f - 2`` nearest."""
    from flwr.server.strategy.aggregate import _compute_distances

    _, lists = _as_lists(records)
    distances = _compute_distances([[a.astype(np.float64) for a in w] for w in lists])
    nearest = max(1, len(records) - f - 2)
    return np.array([np.sort(row)[1 : nearest + 1].sum() for row in distances])


def _krum(records, weights, f):
    from flwr.server.strategy.aggregate import aggregate_krum

    keys, lists = _as_lists(records)
    return _record(keys, aggregate_krum([(w, 1) for w in lists], f, 0), records[0])


def _multi_krum(records, weights, f):
    best = selected_by("multi-krum", records, f)
    return weighted_mean_arrays([records[i] for i in best], [1.0] * len(best))


_RULES: dict[str, Callable[[Sequence[ArrayRecord], Sequence[float], int], ArrayRecord]] = {
    "mean": lambda records, weights, f: weighted_mean_arrays(records, weights),
    "median": _median,
    "trimmed-mean": _trimmed_mean,
    "krum": _krum,
    "multi-krum": _multi_krum,
}


def needed(rule: str, malicious: int) -> int:
    """The fewest uploads ``rule`` needs to tolerate ``malicious`` arbitrary ones: more than
    :math:`2f` for the trimmed mean (something is left after the cuts), :math:`2f + 3` for
    Krum and Multi-Krum (Blanchard et al.'s condition), one otherwise."""
    return {
        "trimmed-mean": 2 * malicious + 1,
        "krum": 2 * malicious + 3,
        "multi-krum": 2 * malicious + 3,
    }.get(rule, 1)


def aggregate(
    rule: str, records: Sequence[ArrayRecord], weights: Sequence[float], malicious: int
) -> ArrayRecord:
    """Combine ``records`` (one layout, checked by the server's screening) by ``rule``,
    tolerating ``malicious`` arbitrary ones; ``weights`` are the server's weights."""
    if not records:
        raise FGLError("Nothing to aggregate: no client uploaded arrays.")
    return _RULES[rule](records, weights, malicious)


def selected_by(rule: str, records: Sequence[ArrayRecord], malicious: int) -> list[int]:
    """The indices of the uploads ``krum``/``multi-krum`` keep this round (every index for
    the coordinate-wise rules): what the round's record reports."""
    if rule == "krum":
        return [int(np.argmin(_krum_scores(records, malicious)))]
    if rule == "multi-krum":
        keep = max(1, len(records) - malicious)
        return sorted(
            int(i) for i in np.argsort(_krum_scores(records, malicious), kind="stable")[:keep]
        )
    return list(range(len(records)))
