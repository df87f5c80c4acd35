r"""Classification and regression metrics, and their aggregation over clients (link
prediction's: :mod:`fgl_flower.link_metrics`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from fgl_flower.tasks import lower_is_better


def macro_f1(pred: Tensor, target: Tensor, num_classes: int, all_classes: bool = False) -> float:
    r"""Macro-F1 over the classes present in ``target`` or ``pred`` (or over all classes).

    .. math::
        \mathrm{F1}_c = \frac{2\,\mathrm{TP}_c}{2\,\mathrm{TP}_c+\mathrm{FP}_c+\mathrm{FN}_c},
        \qquad \mathrm{F1} = \frac{1}{|\mathcal C|}\sum_{c\in\mathcal C}\mathrm{F1}_c

    with :math:`\mathcal C` the classes that occur in the labels or the predictions (as
    scikit-learn's ``f1_score(average="macro")``). With ``all_classes`` the mean runs over
    all ``num_classes`` classes and an absent class counts as 0 (``f1_score(labels=
    range(C), zero_division=0)``, O-pFGL §2.13). Returns 0 for empty input.
    """
    if target.numel() == 0:
        return 0.0
    idx = target * num_classes + pred
    cm = torch.bincount(idx, minlength=num_classes * num_classes).view(num_classes, num_classes)
    tp = cm.diag().double()
    fp = cm.sum(0).double() - tp
    fn = cm.sum(1).double() - tp
    present = (cm.sum(0) + cm.sum(1)) > 0
    f1 = 2 * tp / (2 * tp + fp + fn).clamp(min=1)
    return float(f1.mean() if all_classes else f1[present].mean())


def classification_metrics(logits: Tensor, target: Tensor, num_classes: int) -> dict[str, float]:
    """Cross-entropy loss, accuracy and macro-F1 (over present classes, ``f1``, and over
    all ``num_classes``, ``f1_all``) of ``logits [n, C]`` against ``target [n]``."""
    if target.numel() == 0:
        return {"loss": 0.0, "acc": 0.0, "f1": 0.0, "f1_all": 0.0}
    pred = logits.argmax(-1)
    return {
        "loss": float(F.cross_entropy(logits, target)),
        "acc": float((pred == target).double().mean()),
        "f1": macro_f1(pred, target, num_classes),
        "f1_all": macro_f1(pred, target, num_classes, all_classes=True),
    }


def regression_metrics(pred: Tensor, target: Tensor) -> dict[str, float]:
    r"""Mean squared and absolute error of ``pred [n]`` against ``target [n]``:
    :math:`\mathrm{MSE} = \frac1n\sum_i (\hat y_i - y_i)^2` (also the ``loss``) and
    :math:`\mathrm{MAE} = \frac1n\sum_i |\hat y_i - y_i|`; 0 for empty input."""
    if target.numel() == 0:
        return {"loss": 0.0, "mse": 0.0, "mae": 0.0}
    err = pred.reshape(-1).double() - target.reshape(-1).double()
    mse = float((err**2).mean())
    return {"loss": mse, "mse": mse, "mae": float(err.abs().mean())}


def majority_class(labels: Tensor, num_classes: int) -> int:
    """The most frequent class in ``labels`` (lowest index on ties; 0 when empty)."""
    return int(torch.bincount(labels, minlength=num_classes).argmax()) if labels.numel() else 0


def minority_metrics(logits: Tensor, target: Tensor, majority: int) -> dict[str, float]:
    r"""Accuracy on the *minority* nodes: those whose label is not ``majority``.

    FedSpray (KDD'24, §5.2) defines the majority class per client (from its training
    labels); every other class is minority there. Returns ``minority_acc`` and
    ``minority_count``, so that pooling over clients (weighting by the count) gives the
    paper's micro-averaged minority accuracy.
    """
    mask = target != majority
    count = int(mask.sum())
    acc = float((logits[mask].argmax(-1) == target[mask]).double().mean()) if count else 0.0
    return {"minority_acc": acc, "minority_count": float(count)}


def summarize_clients(
    values: Sequence[Mapping[str, float]],
    metrics: Sequence[str],
    weight_key: Mapping[str, str | None],
    count_key: Mapping[str, str] | None = None,
) -> dict[str, float]:
    r"""Aggregate per-client metrics into weighted mean, plain mean, std and worst client.

    For each ``m`` in ``metrics`` (e.g. ``"test_acc"``), with weights :math:`n_k` read from
    ``values[k][weight_key[m]]`` (1 for every client if that key is ``None``):

    * ``m`` -- weighted mean :math:`\sum_k n_k m_k / \sum_k n_k` (the headline number),
    * ``m_mean`` / ``m_std`` -- unweighted mean and population std over clients,
    * ``m_worst`` -- the minimum (the maximum for losses and errors).

    With ``count_key``, a client whose count ``values[k][count_key[m]]`` is 0 has no value
    for ``m`` (e.g. minority accuracy on a client without minority test nodes) and is
    left out of all four; a metric no client has is left out.
    """
    out: dict[str, float] = {}
    for m in metrics:
        have = [v for v in values if count_key is None or float(v.get(count_key[m], 1.0)) > 0]
        xs = [float(v[m]) for v in have]
        ws = [1.0 if weight_key[m] is None else float(v[weight_key[m]]) for v in have]
        if not xs:
            continue
        total = sum(ws)
        mean = sum(xs) / len(xs)
        out[m] = sum(w * x for w, x in zip(ws, xs)) / total if total > 0 else mean
        out[f"{m}_mean"] = mean
        out[f"{m}_std"] = math.sqrt(sum((x - mean) ** 2 for x in xs) / len(xs))
        out[f"{m}_worst"] = max(xs) if lower_is_better(m) else min(xs)
    return out
