r"""FedSpray server (Fu et al., KDD 2024): encoder averaging and structure proxy alignment.

The feature-structure encoder is averaged by training-node counts (Eq. 14),

.. math::
    \omega_r = \sum_k \frac{n^{(k)}}{\sum_{k'} n^{(k')}}\,\omega_r^{(k)},

and each class proxy by the clients' class ratios (Eq. 15),

.. math::
    \mathbf s_{j,r} = \sum_k \frac{a^{(k)}_j}{\sum_{k'} a^{(k')}_j}\,\mathbf s^{(k)}_{j,r},

so clients where class :math:`j` is frequent dominate its proxy and clients without it
contribute nothing. A class that no client has keeps its previous proxy. The personalized
GNNs never reach the server.

With client-level DP (``fedspray.dp-clip``) the class ratios stay on the clients (they are
the label distribution): encoder and proxies arrive as one clipped update and are averaged
with equal weights plus noise (:mod:`fgl_flower.dp`), Eq. 15's weights replaced by
:math:`1/k` (a class a client lacks comes back as the previous proxy).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord
from flwr.serverapp import Grid

from fgl_flower.errors import FGLError
from fgl_flower.methods.fedspray import DP_PROXIES, PROXIES, FedSprayOptions
from fgl_flower.models.fedspray import initial_proxies
from fgl_flower.protocol import ARRAYS
from fgl_flower.records import get_record, require_record
from fgl_flower.strategies.fedavg import FedAvgStrategy
from fgl_flower.strategies.screening import shares_problem, values_of


def align_proxies(proxies: np.ndarray, ratios: np.ndarray, previous: np.ndarray) -> np.ndarray:
    r"""Class-ratio-weighted mean of client proxies (Eq. 15).

    Args:
        proxies: ``[K, C, d_s]``, client :math:`k`'s proxy of class :math:`j`.
        ratios: ``[K, C]``, :math:`a^{(k)}_j`, the fraction of client :math:`k`'s
            training nodes in class :math:`j`.
        previous: ``[C, d_s]``, kept for classes with :math:`\sum_k a^{(k)}_j = 0`.

    Returns:
        ``[C, d_s]`` global proxies (float64 accumulation, ``previous``'s dtype).
    """
    proxies = np.asarray(proxies, dtype=np.float64)
    ratios = np.asarray(ratios, dtype=np.float64)
    if (
        proxies.ndim != 3
        or ratios.shape != proxies.shape[:2]
        or previous.shape != proxies.shape[1:]
    ):
        raise FGLError(
            f"Proxy shapes disagree: proxies {proxies.shape}, ratios {ratios.shape}, "
            f"previous {previous.shape}."
        )
    total = ratios.sum(0)
    out = previous.astype(np.float64)
    has = total > 0
    out[has] = np.einsum("kc,kcd->cd", ratios, proxies)[has] / total[has, None]
    return out.astype(previous.dtype)


class FedSprayStrategy(FedAvgStrategy):
    """Sends encoder + proxies, aggregates them by Eq. 14/15; evaluates the local GNNs.

    Aggregation does not touch the personalized GNNs, so the evaluation after round
    :math:`r` (spec §3.4) equals evaluating them at the end of the client's round:
    clients report it in the train reply (:attr:`evaluates_in_train`).
    """

    evaluates_in_train = True

    checkpointed = FedAvgStrategy.checkpointed + ("proxies",)

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        self.opts = FedSprayOptions.from_config(cfg)
        self.proxies: np.ndarray | None = None  # the global S; None until round 1 ends
        if self.dp is None:  # in clear the proxies and class ratios come apart from the encoder
            self.checked_uploads = {MessageType.TRAIN: (ARRAYS, PROXIES)}

    def upload_reference(self, name: str, message: Message | None) -> ArrayRecord | None:
        """The proxies go down as ``S`` alone and come up with the class ratios: their layout
        is the one the round's majority (and then every later round) uploads."""
        return None if name == PROXIES else super().upload_reference(name, message)

    def reply_problem(self, server_round: int, reply: Message) -> str | None:
        """In clear, the class ratios (Eq. 15's weights) must be shares of one whole."""
        if self.dp is not None or reply.metadata.message_type != MessageType.TRAIN:
            return None
        return shares_problem(
            values_of(get_record(reply.content, PROXIES, ArrayRecord), "class-ratio"),
            f"{PROXIES}/class-ratio",
        )

    def start_from_sent(self) -> ArrayRecord | None:
        """Under DP, what a client clips its upload against: the sent encoder (its projector
        replaced by the classifier in the official variant, whose clients load it so) and
        the sent proxies, under :data:`~fgl_flower.clients.fedspray.DP_PROXIES`."""
        if self.dp is None or not len(self.sent) or self.proxies is None:
            return super().start_from_sent()
        start = dict(self.sent.items())
        if self.opts.variant == "official":
            start.update(
                {
                    "projector." + k.removeprefix("classifier."): v
                    for k, v in self.sent.items()
                    if k.startswith("classifier.")
                }
            )
        return ArrayRecord({**start, DP_PROXIES: Array(self.proxies)})

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        content = self.round_content(server_round, arrays, config)
        if self.proxies is not None:  # round 1: clients start from S_0 themselves
            content[PROXIES] = ArrayRecord({"S": Array(self.proxies)})
        return self.broadcast(content, MessageType.TRAIN)

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """The encoder by FedAvg's rule (Eq. 14), then the proxies by Eq. 15."""
        replies = list(replies)
        encoder, metrics = super().aggregate_train(server_round, replies)
        if self.dp is not None:  # encoder and proxies were averaged (and noised) together
            if DP_PROXIES in encoder:  # (a round that released nothing keeps both)
                self.proxies = encoder[DP_PROXIES].numpy()
            return ArrayRecord({k: v for k, v in encoder.items() if k != DP_PROXIES}), metrics
        if not self.opts.zero_proxies:
            uploads = [require_record(r.content, PROXIES, ArrayRecord) for r in replies]
            proxies = np.stack([u["S"].numpy() for u in uploads])
            ratios = np.stack([u["class-ratio"].numpy() for u in uploads])
            previous = self.proxies
            if previous is None:
                previous = initial_proxies(*proxies.shape[1:]).numpy()
            self.proxies = align_proxies(proxies, ratios, previous)
        return encoder, metrics
