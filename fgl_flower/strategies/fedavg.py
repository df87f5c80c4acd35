r"""FedAvg (McMahan et al., 2017) on the Message API.

.. math::
    w^{t+1} = \sum_{k=1}^{K} \frac{n_k}{\sum_j n_j}\, w_k^{t+1}

with :math:`n_k` the client's number of training examples (``num-examples``; 1 for every
client under ``agg-weight = uniform``, decided by the server).
Clients upload only their shared parameters (see :class:`~fgl_flower.clients.learner.Learner`).
With ``<method>.secure-aggregation`` the server learns only the sums (:mod:`fgl_flower.secagg`);
with ``<method>.dp-clip`` the uploads are clipped updates and the mean gets Gaussian noise
(client-level DP, :mod:`fgl_flower.dp`); with ``aggregation`` a robust rule replaces the
mean (:mod:`fgl_flower.strategies.robust`).

The server trusts no client (:meth:`FedAvgStrategy.screen`): every upload must have the
layout of the model it started from; under DP its update must lie within the clipping
norm; under SecAgg+ its masked vector must have the length of that layout, and the sum's
weight must be the weights the server expects.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from logging import WARNING

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.supercore import log

from fgl_flower.dp.server import CentralDP
from fgl_flower.errors import FGLError
from fgl_flower.protocol import ARRAYS, NUM_EXAMPLES, START
from fgl_flower.records import array_of, get_record, require_record
from fgl_flower.secagg.protocol import SECURE_AGGREGATION, WEIGHT_KEY
from fgl_flower.secagg.server import (
    SecAggPlusRound,
    SecAggPlusSettings,
    declared_layout,
    masked_problem,
)
from fgl_flower.seeds import derive_seed
from fgl_flower.strategies import robust
from fgl_flower.strategies.base import FGLStrategy
from fgl_flower.strategies.grid import ClientFailure, reply_partition_id
from fgl_flower.strategies.screening import (
    layout_of,
    majority,
    record_digest,
    rounding_norm,
    update_norm,
    update_norm_problem,
)


class FedAvgStrategy(FGLStrategy):
    """Average uploaded arrays weighted by ``num-examples``, in partition-id order.

    The global model of round ``r`` is evaluated in round ``r + 1``'s train message
    (:attr:`~FGLStrategy.evaluate_with_next_train`).
    """

    evaluate_with_next_train = True

    checkpointed = ("dp_releases",)

    checked_uploads = {MessageType.TRAIN: (ARRAYS,)}

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        #: ``<method>.secure-aggregation`` (methods that declare it: FedAvg, FedProx, FedStar,
        #: FedDense): the uploaded arrays through SecAgg+, the server learns only their sum
        self.secure = bool(dict(cfg.method_options).get(SECURE_AGGREGATION, False))
        self._secagg: SecAggPlusRound | None = None
        self._secure_mean: ArrayRecord | None = None
        #: ``<method>.dp-clip`` > 0: noise on the mean and its accountant
        self.dp = CentralDP.from_config(cfg)
        #: the global arrays of this round's train messages (what the clients started from)
        self.sent = ArrayRecord()
        #: ``(round, w0)``: the model this round's clients started from, where the server
        #: needs it (:meth:`needs_start`); set when the round's replies are screened
        self._start: tuple[int, ArrayRecord] | None = None
        #: what this round's aggregation adds to its record (robust rule, refused sum)
        self._note: dict = {}

    @property
    def dp_releases(self) -> np.ndarray | None:
        """The DP releases so far (checkpointed: the accountant resumes from them)."""
        return None if self.dp is None else self.dp.releases

    @dp_releases.setter
    def dp_releases(self, value: np.ndarray) -> None:
        if self.dp is not None:
            self.dp.load(value)

    def round_content(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord
    ) -> RecordDict:
        self.sent = arrays
        return super().round_content(server_round, arrays, config)

    def uploads_model(self, server_round: int) -> bool:
        """Whether this round's clients upload the model to average (default: every round;
        FedSage+'s generator rounds and FedLoG's last round upload none)."""
        return True

    # -- the round's start model -------------------------------------------------------------
    def needs_start(self) -> bool:
        """Whether the server must know each round's start model :math:`w_0` (under DP: the
        bound of every update, and the zero update of a missing client). In a round that
        sent none, the clients send theirs back (:data:`~fgl_flower.protocol.START`)."""
        return self.dp is not None

    def start_from_sent(self) -> ArrayRecord | None:
        """:math:`w_0` as the server sent it (``None`` in a round that sent no arrays); a
        method whose clients start from something else than the sent arrays says so."""
        return self.sent if len(self.sent) else None

    def agreed_start(
        self, server_round: int, replies: list[Message]
    ) -> tuple[ArrayRecord, dict[int, str]]:
        """``(w0, {partition id: why refused})``: the sent model, or in a round that sent
        none the :data:`~fgl_flower.protocol.START` record a strict majority of ``replies``
        share bit for bit (each client builds it from the run seed); the replies with
        another are refused. Without a majority the round stops: nothing tells the honest
        clients apart."""
        if (sent := self.start_from_sent()) is not None:
            return sent, {}
        starts = {reply_partition_id(r): get_record(r.content, START, ArrayRecord) for r in replies}
        digests = {p: None if s is None else record_digest(s) for p, s in starts.items()}
        agreed = majority(list(digests.values()))
        if agreed is None:
            raise ClientFailure(
                f"the clients started round {server_round} from different models (no majority of "
                f"{len(replies)} agrees); each builds it from the run seed, so run every client with the "
                "same code and run config."
            )
        start = next(starts[p] for p, d in digests.items() if d == agreed)
        return start, {
            p: "no start model (round 1's w0)"
            if d is None
            else "its start model (round 1's w0) differs from the other clients'"
            for p, d in digests.items()
            if d != agreed
        }

    def start_of_round(self, server_round: int, replies: list[Message]) -> ArrayRecord:
        """This round's :math:`w_0` (:meth:`agreed_start`; screened replies set it)."""
        if self._start is None or self._start[0] != server_round:
            self._start = (server_round, self.agreed_start(server_round, replies)[0])
        return self._start[1]

    # -- screening -----------------------------------------------------------------------------
    def screen(
        self, server_round: int, messages: list[Message], replies: list[Message]
    ) -> dict[int, str]:
        """The base checks, and for train replies: an upload with the layout of the round's
        start; under DP, every update within the clipping norm (the start model agreed
        first where nothing was sent); under SecAgg+, a masked vector of that layout's
        length (:func:`~fgl_flower.secagg.server.masked_problem`)."""
        refused = self.screen_replies(replies)
        train = [
            r
            for r in replies
            if r.metadata.message_type == MessageType.TRAIN and reply_partition_id(r) not in refused
        ]
        if train and not self.uploads_model(server_round):  # nothing to average: an upload is a lie
            refused.update(
                {
                    reply_partition_id(r): f"{ARRAYS}: an upload in a round that averages none"
                    for r in train
                    if len(get_record(r.content, ARRAYS, ArrayRecord) or ())
                }
            )
            return refused
        refused.update(
            self.screen_uploads(messages, replies, refused, skip=((MessageType.TRAIN, ARRAYS),))
        )
        refused.update(self.screen_own(server_round, replies, refused))
        train = [r for r in train if reply_partition_id(r) not in refused]
        if not train:
            return refused
        if self.needs_start():
            start, disagree = self.agreed_start(server_round, train)
            self._start = (server_round, start)
            refused.update(disagree)
            train = [r for r in train if reply_partition_id(r) not in refused]
        if self.secure:
            refused.update(self.screen_masked(train))
            return refused
        refused.update(self.screen_layouts(train, self.sent_by_partition(messages), (ARRAYS,)))
        if self.dp is not None:
            start = self._start[1]
            for r in train:
                p = reply_partition_id(r)
                if p not in refused and (
                    why := update_norm_problem(
                        require_record(r.content, ARRAYS, ArrayRecord), start, self.dp.settings.clip
                    )
                ):
                    refused[p] = why
        return refused

    def upload_reference(self, name: str, message: Message | None) -> ArrayRecord | None:
        if name == ARRAYS and self._start is not None and self.needs_start():
            return self._start[1]
        if name == ARRAYS:
            return self.start_from_sent()
        return super().upload_reference(name, message)

    def screen_masked(self, replies: list[Message]) -> dict[int, str]:
        """Refuse masked uploads whose declared layout or vector length is not the start
        model's (or, in a round that sent none, the layout a majority declares)."""
        start = (
            self._start[1]
            if self._start is not None and self.needs_start()
            else self.start_from_sent()
        )
        if start is not None:
            want = masked_layout(start)
        else:
            want = majority([declared_layout(r) for r in replies])
            if want is None:
                raise ClientFailure(
                    "the clients' masked uploads declare different layouts and no majority "
                    "shares one; nothing tells the honest ones apart"
                )
        return {
            reply_partition_id(r): f"{ARRAYS}: {why}"
            for r in replies
            if (why := masked_problem(r, ARRAYS, want)) is not None
        }

    # -- secure aggregation ----------------------------------------------------------------------
    def prepare_round(
        self,
        server_round: int,
        config: ConfigRecord,
        send: Callable[[list[Message]], list[Message]],
    ) -> None:
        """With secure aggregation: SecAgg+'s key exchange among the round's clients."""
        self._note = {}
        if self.secure:
            self._secagg = SecAggPlusRound(
                self.node_ids,
                SecAggPlusSettings(),
                derive_seed(self.cfg.seed, server_round, "secagg"),
            )
            self._secagg.share_keys(send)

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid
    ) -> Iterable[Message]:
        messages = super().configure_train(server_round, arrays, config, grid)
        if not self.secure:
            return messages
        # each train message also asks for the masked, weighted upload; none goes to a client
        # that failed in the key exchange
        return [
            self._secagg.collect_message(
                m.metadata.dst_node_id,
                m.content,
                ARRAYS,
                weight=NUM_EXAMPLES,
                message_type=m.metadata.message_type,
            )
            for m in messages
            if m.metadata.dst_node_id in self._secagg.shared
        ]

    def finish_round(
        self,
        server_round: int,
        replies: list[Message],
        send: Callable[[list[Message]], list[Message]],
    ) -> None:
        """With secure aggregation: unmask the sum of ``n_k w_k`` and of ``n_k``; the mean.

        The sum's weight must be the sum of the weights the server expects of the clients
        summed (1 each under uniform weights, else their clear ``num-examples``): a client
        whose masked weight differs from it makes the sum unusable, and so, under DP, does a
        sum that moved more than ``m C`` from the start (a client did not clip). Such a
        round keeps the model it started from (and, under DP, releases nothing)."""
        if not self.secure:
            return
        result = self._secagg.unmask(replies, ARRAYS, send)
        total, self._secagg = result.total, None
        if result.refused:  # the protocol's own replies that were malformed or did not fit
            partition_of = {node: pid for pid, node in self.nodes.items()}
            self._note["secagg_refused"] = {
                str(partition_of.get(n, n)): why for n, why in result.refused.items()
            }
            log(
                WARNING,
                "Round %d: SecAgg+ left out or corrected: %s",
                server_round,
                "; ".join(
                    f"partition {p}: {why}" for p, why in self._note["secagg_refused"].items()
                ),
            )
        weight = float(total.pop(WEIGHT_KEY)[0])
        expected = sum(self.reply_weight(r) for r in replies)
        m = len(replies)
        why = None
        if not math.isclose(weight, expected, rel_tol=1e-9, abs_tol=1e-6):
            why = (
                f"the masked weights sum to {weight:.6g}, not the {expected:g} of the {m} clients summed "
                "(a client masked another weight than it reports)"
            )
        elif self.dp is not None:
            start = self.start_of_round(server_round, replies)
            summed = ArrayRecord({k: array_of(v.numpy()) for k, v in total.items()})
            scaled = ArrayRecord(
                {k: array_of(start[k].numpy().astype(np.float64) * m) for k in start.keys()}
            )
            norm, _ = update_norm(summed, scaled)
            d = sum(int(np.prod(start[k].shape)) for k in start.keys())
            # each client's clip, its upload's rounding to float32 (entries within C of w0) and
            # the fixed point's rounding
            clip = self.dp.settings.clip
            bound = m * (clip + rounding_norm(start, clip) + math.sqrt(d) * 2.0**-33)
            if norm > bound:
                why = (
                    f"the sum of the {m} updates has norm {norm:.6g}, above {m} x dp-clip={self.dp.settings.clip:g} "
                    "(a client did not clip)"
                )
        if why is not None:
            self._secure_mean = None
            self._note = {"refused_sum": why}
            return
        if self.dp is not None and m < self.dp.cohort:  # zero-out: a missing client adds w0
            import torch

            start = self.start_of_round(server_round, replies)
            gap = self.dp.cohort - m
            total = {
                k: v + gap * torch.from_numpy(start[k].numpy().astype(np.float64))
                for k, v in total.items()
            }
            weight += gap
        if weight <= 0:  # as the clear mean (weighted_mean_arrays) stops
            raise FGLError("Aggregation weights sum to zero (no client has training examples).")
        self._secure_mean = ArrayRecord(
            {k: array_of((v / weight).float().numpy()) for k, v in total.items()}
        )

    # -- aggregation ------------------------------------------------------------------------------
    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)
        if self.secure:
            mean, self._secure_mean = self._secure_mean, None
        else:
            records = [require_record(r.content, ARRAYS, ArrayRecord) for r in replies]
            weights = self.aggregation_weights(server_round, replies)
            if self.dp is not None and len(records) < self.dp.cohort:
                # zero-out (DP-FedAvg's fixed denominator): a missing client adds no update
                records.append(self.start_of_round(server_round, replies))
                weights.append(float(self.dp.cohort - len(replies)))
            mean = self.average(server_round, records, weights, replies)
        if mean is None:  # a refused secure sum: the round keeps its start
            mean = self.kept_model(server_round, replies)
            if self.dp is not None:
                self.dp.withhold(server_round, len(replies), self._note["refused_sum"])
        elif self.dp is not None:
            mean = self.dp.privatize(server_round, mean, len(replies))
        return mean, self.aggregate_train_metrics(replies)

    def kept_model(self, server_round: int, replies: list[Message]) -> ArrayRecord:
        """The model a round whose aggregate is refused keeps: the one it started from."""
        start = (
            self.start_of_round(server_round, replies)
            if self.needs_start()
            else self.start_from_sent()
        )
        if start is None:
            raise FGLError(
                f"Round {server_round}: {self._note['refused_sum']}; the clients built round "
                f"{server_round}'s start model themselves, so there is none to keep: start again "
                "without the client that lies."
            )
        return start

    def average(
        self,
        server_round: int,
        records: list[ArrayRecord],
        weights: list[float],
        replies: list[Message],
    ) -> ArrayRecord:
        """The run's ``aggregation`` rule over ``records`` (:mod:`~fgl_flower.strategies.robust`;
        the weighted mean by default); Krum's choice goes into the round's record."""
        rule = self.cfg.aggregation
        f = self.cfg.malicious_clients
        if rule in ("krum", "multi-krum"):
            pids = [reply_partition_id(r) for r in replies]
            self._note["aggregation"] = {
                "rule": rule,
                "kept": [pids[i] for i in robust.selected_by(rule, records, f)],
            }
        elif rule != "mean":
            self._note["aggregation"] = {"rule": rule}
        return robust.aggregate(rule, records, weights, f)

    def round_record(self, server_round: int) -> dict:
        """With DP: the budget spent after this round and its noise (``dp``); a robust rule's
        choice (``aggregation``); a refused secure sum (``refused_sum``); clients whose SecAgg+
        replies were malformed or whose shares did not fit (``secagg_refused``)."""
        out = dict(self._note)
        self._note = {}
        if self.dp is not None:
            out["dp"] = self.dp.record()
        return out

    def aggregation_weights(self, server_round: int, replies: list[Message]) -> list[float]:
        """The weight of each reply's arrays (:meth:`~FGLStrategy.reply_weight`)."""
        return [self.reply_weight(r) for r in replies]


def masked_layout(start: ArrayRecord) -> list[tuple[str, tuple[int, ...]]]:
    """The layout a masked, weighted upload of ``start``'s arrays declares (SecAgg+'s
    encoding: keys sorted, the weight among them)."""
    shapes = {k: s for k, _, s in layout_of(start)}
    shapes[WEIGHT_KEY] = (1,)
    return [(k, shapes[k]) for k in sorted(shapes)]
