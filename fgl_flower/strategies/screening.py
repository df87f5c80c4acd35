r"""What a client's reply must be before the server uses it.

The server trusts no client (``docs/privacy.md``, threat model): a reply that is malformed
or lies is refused, as a failed client (:meth:`~fgl_flower.strategies.grid.MeteredGrid.refuse`),
before it can touch the global model, the round's metrics or the privacy bound. This module
holds the checks themselves, each a pure function of records that returns the reason a
reply is refused (``None``: accepted); the strategies decide which apply:

- :func:`array_problems`: every array readable as its declared dtype and shape, of a numeric
  dtype, and finite (no NaN, no :math:`\pm\infty`);
- :func:`layout_problem`: an uploaded record has the keys, dtypes and shapes of its
  reference (what the server sent under that name, or what the round's honest majority
  uploads: :func:`majority`);
- :func:`weight_problem`: a train reply's ``num-examples`` is a whole number in
  :math:`[1, 2^{31} - 1]`;
- :func:`update_norm_problem`: under DP, :math:`\lVert w_k - w_0\rVert_2 \le C` for the
  upload :math:`w_k` and the round's start :math:`w_0` (integer arrays unchanged).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

import numpy as np
from flwr.app import ArrayRecord, MetricRecord, RecordDict

from fgl_flower.probes import PROBE
from fgl_flower.protocol import NUM_EXAMPLES, PARTITION_ID
from fgl_flower.records import array_numpy

T = TypeVar("T", bound=Hashable)

#: One record's layout: ``((key, dtype, shape), ...)`` in the record's key order.
Layout = tuple[tuple[str, str, tuple[int, ...]], ...]

#: The largest ``num-examples`` a reply may claim: more nodes or graphs than any graph in
#: reach has (ogbn-papers100M: 1.1e8); a larger count is a lie or a bug.
MAX_EXAMPLES = 2**31 - 1


#: Array dtypes a reply may carry (NumPy's names): numbers, nothing that pickles.
NUMERIC_KINDS = "biuf"


def layout_of(record: ArrayRecord) -> Layout:
    """The keys, dtypes and shapes of ``record``'s arrays, in its order."""
    return tuple((key, str(a.dtype), tuple(int(d) for d in a.shape)) for key, a in record.items())


def layout_problem(got: Layout, want: Layout) -> str | None:
    """How ``got`` differs from ``want`` (missing or extra keys, another dtype or shape),
    or ``None`` when they hold the same arrays (in any order: arrays are taken by key)."""
    if got == want or sorted(got) == sorted(want):
        return None
    have, need = {k: (d, s) for k, d, s in got}, {k: (d, s) for k, d, s in want}
    if missing := [k for k in need if k not in have]:
        return f"missing key(s) {_few(missing)}"
    if extra := [k for k in have if k not in need]:
        return f"unexpected key(s) {_few(extra)}"
    for key, (dtype, shape) in need.items():
        if have[key][1] != shape:
            return f"{key!r} has shape {have[key][1]}, expected {shape}"
        if have[key][0] != dtype:
            return f"{key!r} has dtype {have[key][0]}, expected {dtype}"
    return None


def array_problems(content: RecordDict) -> str | None:
    """Why the arrays of ``content`` cannot be used: an array whose bytes do not hold its
    declared dtype and shape, a non-numeric dtype, or non-finite values; ``None`` if none."""
    for name, record in content.items():
        if not isinstance(record, ArrayRecord):
            continue
        for key, array in record.items():
            where = f"{name}/{key}"
            try:
                dtype = np.dtype(array.dtype)
                if dtype.kind not in NUMERIC_KINDS:
                    return f"{where} has dtype {array.dtype}, not a number"
                if array.stype != "numpy.ndarray":
                    return f"{where} has stype {array.stype!r}, not numpy.ndarray"
                values = array_numpy(array)
            except Exception as e:  # noqa: BLE001 - whatever the bytes make a parser raise is a refusal
                return f"{where} is unreadable as {array.dtype}{tuple(array.shape)} ({type(e).__name__}: {e})"
            if values.shape != tuple(array.shape):
                return f"{where} holds shape {values.shape}, declared {tuple(array.shape)}"
            if dtype.kind == "f" and not np.isfinite(values).all():
                bad = values[~np.isfinite(values)]
                return f"{where} has {int(np.isnan(bad).sum())} NaN and {int(np.isinf(bad).sum())} infinite value(s)"
    return None


#: Evaluation metrics that are shares (accuracies, F1 scores): in ``[0, 1]``.
SHARE_SUFFIXES = ("_acc", "_f1", "_f1_all")
#: Evaluation losses (cross-entropies, which ``select-by = val_loss`` reads): at least 0.
EVAL_LOSSES = ("val_loss", "test_loss")


def metric_problems(name: str, metrics: MetricRecord | None, partition_id: int) -> str | None:
    """Why a reply's metric record ``name`` (``metrics``; its evaluation record too) cannot
    be read: missing, without the reply's ``partition-id``, a value that is not a number, a
    share (``*_acc``, ``*_f1``) outside ``[0, 1]``, an evaluation loss below 0, or a count
    (``num-*``) that is not a whole number from 0 to :data:`MAX_EXAMPLES`. The server cannot tell a plausible lie from the truth: a client's
    evaluation within these ranges is its word."""
    if metrics is None:
        return f"no {name!r} record"
    if PARTITION_ID not in metrics or metrics[PARTITION_ID] != partition_id:
        return f"{name}: no {PARTITION_ID} {partition_id}"
    for key, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"{name}: {key} is not a number ({type(value).__name__})"
        if not math.isfinite(value) or key.startswith(PROBE):
            continue  # on-nonfinite decides (fgl_flower.strategies.base.drop_nonfinite); probes are free
        if key.endswith(SHARE_SUFFIXES) and not 0.0 <= value <= 1.0:
            return f"{name}: {key}={value:g} outside [0, 1]"
        if key in EVAL_LOSSES and value < -1e-6:  # cross-entropies (selection reads them)
            return f"{name}: {key}={value:g} is negative"
        if (
            key.startswith("num-")
            and key != NUM_EXAMPLES
            and (value < 0 or value > MAX_EXAMPLES or value != int(value))
        ):
            return f"{name}: {key}={value:g} is not a whole number from 0 to {MAX_EXAMPLES}"
    return None


def weight_problem(metrics: MetricRecord | None) -> str | None:
    """Why a train reply's ``num-examples`` (its weight) is refused, or ``None``."""
    if metrics is None or NUM_EXAMPLES not in metrics:
        return f"no {NUM_EXAMPLES}"
    value = metrics[NUM_EXAMPLES]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{NUM_EXAMPLES} is not a number ({value!r})"
    value = float(value)
    if not math.isfinite(value) or value < 1 or value > MAX_EXAMPLES or value != int(value):
        return f"{NUM_EXAMPLES}={value:g} is not a whole number from 1 to {MAX_EXAMPLES}"
    return None


def update_norm(upload: ArrayRecord, start: ArrayRecord) -> tuple[float, list[str]]:
    r"""``(``:math:`\lVert w - w_0\rVert_2` over the floating-point arrays (float64)``, the
    integer arrays that differ from the start)``; both records have one layout."""
    total, changed = 0.0, []
    for key, array in upload.items():
        w, w0 = array_numpy(array), array_numpy(start[key])
        if np.issubdtype(w.dtype, np.floating):
            total += float(((w.astype(np.float64) - w0.astype(np.float64)) ** 2).sum())
        elif not np.array_equal(w, w0):
            changed.append(key)
    return math.sqrt(total), changed


def rounding_norm(record: ArrayRecord, margin: float = 0.0) -> float:
    r""":math:`\lVert \mathrm{ulp}(|w| + \text{margin})\rVert_2` over the floating-point
    arrays: how far rounding values of that size to their dtype can move them, at most (a
    full unit in the last place per entry, twice the rounding's half)."""
    total = 0.0
    for array in record.values():
        w = array_numpy(array)
        if np.issubdtype(w.dtype, np.floating):
            total += float(
                (np.spacing((np.abs(w) + margin).astype(w.dtype)).astype(np.float64) ** 2).sum()
            )
    return math.sqrt(total)


def update_norm_problem(upload: ArrayRecord, start: ArrayRecord, clip: float) -> str | None:
    r"""Why a DP upload is refused: an update longer than the clipping norm ``clip`` plus the
    rounding of the upload to its dtype (:func:`rounding_norm`: a client clips in float64 and
    casts :math:`w_0 + \Delta` back, which moves each entry by up to half a unit in its last
    place, far more than ``clip`` allows for when the model's values are large), or an
    integer array (a counter) that is not the start's."""
    norm, changed = update_norm(upload, start)
    if changed:
        return f"integer array(s) {_few(changed)} changed (a clipped upload keeps them)"
    if norm > (bound := clip + rounding_norm(upload)):
        return f"its update has norm {norm:.6g}, above dp-clip={clip:g} (to {bound:.6g} with rounding; it was not clipped)"
    return None


def local_steps_problem(metrics: MetricRecord, key: str, cfg) -> str | None:
    """Why the local step count a train reply reports under ``key`` (FedNova's :math:`a_k`,
    SCAFFOLD's :math:`K`) cannot be right for the run ``cfg``, or ``None``: on node tasks
    (full batch) exactly ``local-epochs``; on graph tasks ``local-epochs`` times the batches
    of the client's training examples where ``agg-weight = train`` reports them, else a whole
    multiple of ``local-epochs`` up to that of :data:`MAX_EXAMPLES` examples (the client's
    word)."""
    from fgl_flower.datasets.resolve import level_of

    steps, epochs = metrics.get(key), cfg.local_epochs
    if isinstance(steps, bool) or not isinstance(steps, (int, float)) or not math.isfinite(steps):
        return f"{key} is missing or not a finite number"
    if level_of(cfg.dataset) == "node":
        expected = epochs  # full batch: one step an epoch
    elif cfg.agg_weight == "train":
        expected = epochs * math.ceil(float(metrics[NUM_EXAMPLES]) / cfg.batch_size)
    else:
        most = epochs * math.ceil(MAX_EXAMPLES / cfg.batch_size)
        if steps <= 0 or steps > most or steps % epochs:
            return f"{key}={steps:g} is not a multiple of local-epochs={epochs} from {epochs} to {most}"
        return None
    return (
        None if steps == expected else f"{key}={steps:g}, but this run takes {expected} local steps"
    )


def values_of(record: ArrayRecord | None, key: str) -> np.ndarray | None:
    """The array ``key`` of ``record`` as float64 values, ``None`` if either is missing."""
    if record is None or key not in record:
        return None
    return array_numpy(record[key]).astype(np.float64)


def shares_problem(values: np.ndarray | None, what: str) -> str | None:
    """Why ``values`` are not shares of one whole (each in ``[0, 1]``, summing to at most 1)."""
    if values is None:
        return f"no {what}"
    if values.size and (values.min() < 0 or values.max() > 1 or values.sum() > 1 + 1e-6):
        return f"{what} are not shares of one whole (min {values.min():g}, max {values.max():g}, sum {values.sum():g})"
    return None


def counts_problem(values: np.ndarray | None, what: str) -> str | None:
    """Why ``values`` are not counts (whole numbers from 0 to :data:`MAX_EXAMPLES`)."""
    if values is None:
        return f"no {what}"
    if values.size and (
        values.min() < 0
        or values.max() > MAX_EXAMPLES
        or not np.array_equal(values, np.round(values))
    ):
        return f"{what} are not whole numbers from 0 to {MAX_EXAMPLES}"
    return None


def nonnegative_problem(values: np.ndarray | None, what: str) -> str | None:
    """Why ``values`` are not all at least 0."""
    if values is None:
        return f"no {what}"
    return f"{what} below 0 ({values.min():g})" if values.size and values.min() < 0 else None


def minority(values: dict[int, Hashable], what: str) -> dict[int, str]:
    """``{partition: why}`` of the replies whose value (``values``: by partition) is not the
    one a strict majority reports, e.g. a dataset's dimensions every client knows alike;
    without a majority the round stops (:class:`ValueError`, the caller names it)."""
    agreed = majority(list(values.values()))
    if agreed is None and values:
        raise ValueError(f"the clients disagree on {what} and no majority agrees")
    return {
        p: f"{what} {v} differs from the other clients' {agreed}"
        for p, v in values.items()
        if v != agreed
    }


def majority(values: Sequence[T]) -> T | None:
    """The value more than half of ``values`` share, or ``None`` when none does."""
    if not values:
        return None
    value, count = Counter(values).most_common(1)[0]
    return value if 2 * count > len(values) else None


def record_digest(record: ArrayRecord) -> tuple:
    """A hashable identity of ``record``'s layout and bytes (equal records, equal digests)."""
    return tuple((k, a.dtype, tuple(a.shape), a.data) for k, a in record.items())


def _few(keys: Iterable[str], n: int = 4) -> str:
    keys = list(keys)
    return ", ".join(map(repr, keys[:n])) + (f" and {len(keys) - n} more" if len(keys) > n else "")


def refusal_text(refused: Mapping[int, str]) -> str:
    """``"partition 2: ...; partition 5: ..."``."""
    return "; ".join(f"partition {p}: {why}" for p, why in sorted(refused.items()))
