r"""FedFA (Zhou & Konukoglu, "FedFA: Federated Feature Augmentation", ICLR 2023): FedAvg
plus the client-sharing statistic variance.

Every array is averaged as FedAvg does (the clients' running statistic means included);
then each FFA layer's ``sharing_var_mean`` / ``sharing_var_std`` is replaced by the variance
over the round's clients of their uploaded ``running_mean`` / ``running_std``:

.. math::
    \Sigma^2_{\mu,g} = \frac{1}{M}\sum_{m=1}^{M}\bigl(\bar\mu_m - \mathbb E[\bar\mu]\bigr)^2

per channel (``fedfa.sharing = channel``, the paper), or one unbiased variance over every
client and channel at once, broadcast to all channels (``scalar``, the official code's
``torch.var`` of the stacked statistics). Fewer than two clients leave the variance as it
was: a single client defines none.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from flwr.app import ArrayRecord, Message, MetricRecord

from fgl_flower.methods.fedfa import FedFAOptions
from fgl_flower.protocol import ARRAYS
from fgl_flower.records import array_numpy, array_of, require_record
from fgl_flower.strategies.fedavg import FedAvgStrategy

#: Suffixes of the running statistic means and of the variance the server derives from them.
STATISTICS = {"running_mean": "sharing_var_mean", "running_std": "sharing_var_std"}


def sharing_variance(stats: np.ndarray, mode: str) -> np.ndarray:
    """``[M, C]`` client statistics -> ``[C]`` client-sharing variance (float64)."""
    stats = stats.astype(np.float64)
    if mode == "scalar":
        return np.full(stats.shape[1], stats.var(ddof=1))
    return stats.var(axis=0)


class FedFAStrategy(FedAvgStrategy):
    """FedAvg's mean, then each FFA layer's client-sharing variance (module doc)."""

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        self.mode = FedFAOptions.from_config(cfg).sharing
        self.sharing = float("nan")

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)
        mean, metrics = super().aggregate_train(server_round, replies)
        if mean is None or len(replies) < 2:
            return mean, metrics
        records = [require_record(r.content, ARRAYS, ArrayRecord) for r in replies]
        out = dict(mean.items())
        levels = []
        for key in mean.keys():
            for stat, target in STATISTICS.items():
                shared = key[: -len(stat)] + target
                if (
                    key.endswith(stat) and shared in out
                ):  # an FFA layer's (not a BatchNorm's running_mean)
                    var = sharing_variance(
                        np.stack([array_numpy(r[key]) for r in records]), self.mode
                    )
                    out[shared] = array_of(var.astype(array_numpy(mean[shared]).dtype))
                    if stat == "running_mean":
                        levels.append(float(var.mean()))
        self.sharing = float(np.mean(levels)) if levels else float("nan")
        return ArrayRecord(out), metrics

    def idle_probes(self, server_round: int) -> tuple[str, ...]:
        """Round 1's clients have no client-sharing variance yet (their buffers' ones)."""
        return ("ffa.gamma-std",) if server_round == 1 else ()

    def server_probes(self, server_round: int) -> dict[str, float]:
        return {"sharing-var": self.sharing}
