r"""Link-prediction metrics: scores of positive and negative node pairs, higher = edge.

With positive scores :math:`s_1..s_P` and negative scores :math:`t_1..t_Q` (one negative
set shared by all positives), :func:`link_metrics` returns

* ``auc``: ROC-AUC, ties counted one half (``sklearn.metrics.roc_auc_score``),

  .. math::
     \mathrm{AUC} = \frac{1}{PQ}\sum_{i=1}^{P}\sum_{j=1}^{Q}
     \Big(\mathbb 1[s_i > t_j] + \tfrac12\,\mathbb 1[s_i = t_j]\Big);

* ``ap``: average precision (``sklearn.metrics.average_precision_score``): with the
  distinct scores :math:`c` of all pairs, :math:`\mathrm{TP}(c)` and :math:`\mathrm{FP}(c)`
  the positives and negatives scoring :math:`\ge c`, and :math:`p_c` the positives scoring
  exactly :math:`c`,

  .. math::
     \mathrm{AP} = \sum_c \big(R(c) - R(c^+)\big)\,\mathrm{Prec}(c)
     = \frac{1}{P}\sum_c p_c\,\frac{\mathrm{TP}(c)}{\mathrm{TP}(c)+\mathrm{FP}(c)}

  (:math:`c^+` the next higher distinct score; tied pairs enter at one threshold);

* ``hits@K`` as OGB's ``linkproppred`` evaluator: the fraction of positives scoring
  strictly above the :math:`K`-th highest negative score :math:`t_{(K)}`,

  .. math::
     \mathrm{Hits@}K = \frac{1}{P}\sum_{i=1}^{P}\mathbb 1\big[s_i > t_{(K)}\big],

  and 1 when :math:`Q < K` (OGB's rule: fewer negatives than :math:`K` rank nothing out);

* ``mrr``: mean reciprocal rank of each positive among the *shared* negatives, ties
  ranked as OGB does (the mean of the optimistic and the pessimistic rank),

  .. math::
     \mathrm{rank}_i = 1 + \tfrac12\Big(\#\{j : t_j > s_i\} + \#\{j : t_j \ge s_i\}\Big),
     \qquad \mathrm{MRR} = \frac{1}{P}\sum_{i=1}^{P}\frac{1}{\mathrm{rank}_i}.

  OGB's MRR datasets give each positive its own negatives; here every positive is ranked
  against all :math:`Q` negatives (and not against the other positives);

* ``loss``: binary cross-entropy with logits, label 1 for positives and 0 for negatives,
  averaged over all :math:`P+Q` pairs (scores read as logits).

Empty input: when :math:`P=0` or :math:`Q=0` there is nothing to rank, and ``auc``,
``ap``, every ``hits@K`` and ``mrr`` are 0.0 (scikit-learn leaves AUC undefined there);
``loss`` averages over the pairs there are, 0.0 when there are none. Scores must be finite.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor


def link_metrics(pos: Tensor, neg: Tensor, ks: Sequence[int] = (10, 50, 100)) -> dict[str, float]:
    """``auc``, ``ap``, ``hits@K`` for each ``K`` in ``ks``, ``mrr`` and ``loss`` of the
    scores ``pos [P]`` and ``neg [Q]`` (see the module docstring for each definition)."""
    pos = pos.detach().reshape(-1).double().cpu()
    neg = neg.detach().reshape(-1).double().cpu()
    out = {"loss": bce_loss(pos, neg)}
    p, q = pos.numel(), neg.numel()
    if p == 0 or q == 0:
        out.update({"auc": 0.0, "ap": 0.0, "mrr": 0.0})
        out.update({f"hits@{k}": 0.0 for k in ks})
        return out
    sorted_neg = torch.sort(neg).values
    below = torch.searchsorted(sorted_neg, pos, right=False).double()  # t_j < s_i
    not_above = torch.searchsorted(sorted_neg, pos, right=True).double()  # t_j <= s_i
    out["auc"] = float((below + not_above).sum() / (2.0 * p * q))
    out["ap"] = average_precision(pos, neg)
    rank = 1.0 + 0.5 * ((q - not_above) + (q - below))
    out["mrr"] = float((1.0 / rank).mean())
    for k in ks:
        out[f"hits@{k}"] = 1.0 if q < k else float((pos > sorted_neg[q - k]).double().mean())
    return out


def average_precision(pos: Tensor, neg: Tensor) -> float:
    r"""Average precision of positive scores ``pos`` against negative scores ``neg``, as
    ``sklearn.metrics.average_precision_score`` (ties share one threshold); 0.0 when
    ``pos`` is empty."""
    pos, neg = pos.reshape(-1).double(), neg.reshape(-1).double()
    if pos.numel() == 0:
        return 0.0
    scores = torch.cat([pos, neg])
    labels = torch.cat([torch.ones_like(pos), torch.zeros_like(neg)])
    order = torch.argsort(scores, descending=True)
    scores, labels = scores[order], labels[order]
    tp = torch.cumsum(labels, 0)
    _, counts = torch.unique_consecutive(scores, return_counts=True)
    last = torch.cumsum(counts, 0) - 1  # the last pair of each distinct score
    tp_c = tp[last]
    precision = tp_c / (last + 1).double()  # TP(c) / (TP(c) + FP(c))
    new_tp = torch.diff(tp_c, prepend=tp_c.new_zeros(1))  # p_c
    return float((new_tp * precision).sum() / pos.numel())


def bce_loss(pos: Tensor, neg: Tensor) -> float:
    """Mean binary cross-entropy with logits over ``pos`` (label 1) and ``neg`` (label 0);
    0.0 for no pairs."""
    logits = torch.cat([pos.reshape(-1), neg.reshape(-1)]).double()
    if logits.numel() == 0:
        return 0.0
    labels = torch.cat([torch.ones(pos.numel()), torch.zeros(neg.numel())]).double()
    return float(F.binary_cross_entropy_with_logits(logits, labels))
