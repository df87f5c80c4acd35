r"""SCAFFOLD server (Karimireddy et al., ICML 2020, Algorithm 1).

Each round the server sends the global model :math:`x` and its control variate :math:`c`
(:data:`~fgl_flower.methods.scaffold.CONTROL`, from round 2 on; :math:`c = 0` before), and
from the sampled clients :math:`S` of the :math:`N` it updates

.. math::
    x \leftarrow x + \eta_g\,(\bar y - x), \qquad
    c \leftarrow c + \frac{1}{N} \sum_{i \in S} \Delta c_i,

with :math:`\bar y` FedAvg's mean of the uploads (weighted as ``agg-weight`` says; the
paper's :math:`\frac{1}{|S|}\sum_i \Delta y_i` is ``agg-weight = uniform``) and
:math:`\eta_g` = ``scaffold.server-lr`` (1: :math:`x = \bar y`, FedAvg's model).

The server trusts no client: besides FedAvg's checks, each reply's step count :math:`K`
must be the run's (:func:`~fgl_flower.strategies.screening.local_steps_problem`), and its
:math:`\Delta c_i` must be what option II makes of its own upload,
:math:`(x - y_i)/(K\eta_l) - c` (recomputed here in float64; within float32 rounding), so a
client cannot move :math:`c` except by the model it uploads.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord

from fgl_flower.methods.scaffold import CONTROL, DELTA, STEPS
from fgl_flower.protocol import ARRAYS, METRICS
from fgl_flower.records import array_numpy, array_of, require_record
from fgl_flower.strategies.fedavg import FedAvgStrategy
from fgl_flower.strategies.grid import reply_partition_id
from fgl_flower.strategies.screening import local_steps_problem

#: A reply's :math:`\Delta c_i` may differ from the server's recomputation by this share of
#: :math:`\lVert (x - y_i)/(K\eta_l)\rVert + \lVert c\rVert` (float32 rounding is ~1e-7).
DELTA_TOLERANCE = 1e-4


def float_keys(record: ArrayRecord) -> list[str]:
    """The keys of ``record``'s floating-point arrays, in its order (what :math:`c` covers)."""
    return [k for k in record.keys() if np.issubdtype(array_numpy(record[k]).dtype, np.floating)]


def flat(arrays, keys: list[str]) -> np.ndarray:
    """``arrays[k]`` for ``keys`` (an ArrayRecord's or a dict of ndarrays), flattened in that
    order into one float64 vector (:math:`c`, FedDC's drifts)."""
    return np.concatenate(
        [
            np.asarray(array_numpy(arrays[k]) if isinstance(arrays, ArrayRecord) else arrays[k])
            .astype(np.float64)
            .ravel()
            for k in keys
        ]
    )


def unflat(vector: np.ndarray, reference: ArrayRecord, keys: list[str]) -> dict[str, np.ndarray]:
    """:func:`flat`'s inverse: ``vector`` cut into ``reference``'s arrays ``keys`` (shapes)."""
    shapes = [array_numpy(reference[k]).shape for k in keys]
    parts = np.split(vector, np.cumsum([int(np.prod(s)) for s in shapes])[:-1])
    return {k: part.reshape(shape) for k, part, shape in zip(keys, parts, shapes)}


class ScaffoldStrategy(FedAvgStrategy):
    """FedAvg's rounds with the server control variate (module docstring)."""

    checkpointed = FedAvgStrategy.checkpointed + ("control",)

    checked_uploads = {MessageType.TRAIN: (ARRAYS, DELTA)}

    #: the prefix of its probes (FedDC's server is this one with its own)
    probe_prefix = "scaffold"

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        #: eta_g (methods built on SCAFFOLD's control variates without it take 1: FedDC)
        self.server_lr = float(dict(cfg.method_options).get("server-lr", 1.0))
        #: :math:`c`, float64, the float arrays of the global model flattened in their order
        #: (``None``: zero, before the first aggregation)
        self.control: np.ndarray | None = None
        self.control_norm = 0.0

    def needs_start(self) -> bool:
        r""":math:`x` checks every :math:`\Delta c_i` and, with :math:`\eta_g \ne 1`, is
        where the step starts: always needed."""
        return True

    # -- c as records ------------------------------------------------------------------------
    def control_of(self, reference: ArrayRecord) -> dict[str, np.ndarray]:
        """:math:`c` shaped as ``reference``'s float arrays (zeros before round 1 ends)."""
        keys = float_keys(reference)
        if self.control is None:
            return {k: np.zeros(array_numpy(reference[k]).shape) for k in keys}
        return unflat(self.control, reference, keys)

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid
    ) -> Iterable[Message]:
        messages = list(super().configure_train(server_round, arrays, config, grid))
        if self.control is not None and len(arrays):
            record = ArrayRecord(
                {k: array_of(v.astype(np.float32)) for k, v in self.control_of(arrays).items()}
            )
            for m in messages:
                m.content[CONTROL] = record
        return messages

    def upload_reference(self, name: str, message: Message | None) -> ArrayRecord | None:
        if name == DELTA and self._start is not None:  # Delta c_i: c's layout, x's float arrays
            start = self._start[1]
            return ArrayRecord({k: start[k] for k in float_keys(start)})
        return super().upload_reference(name, message)

    # -- screening -----------------------------------------------------------------------------
    def screen(
        self, server_round: int, messages: list[Message], replies: list[Message]
    ) -> dict[int, str]:
        r"""FedAvg's checks, the step count :math:`K`, and :math:`\Delta c_i` against its
        recomputation from the upload (module docstring)."""
        refused = super().screen(server_round, messages, replies)
        for r in replies:
            pid = reply_partition_id(r)
            if pid in refused or r.metadata.message_type != MessageType.TRAIN:
                continue
            metrics = require_record(r.content, METRICS, MetricRecord)
            why = local_steps_problem(metrics, STEPS, self.cfg) or self.delta_problem(r)
            if why is not None:
                refused[pid] = why
        return refused

    def delta_problem(self, reply: Message) -> str | None:
        r"""Why ``reply``'s :math:`\Delta c_i` is not :math:`(x - y_i)/(K\eta_l) - c` of its
        own upload :math:`y_i` (float64), or ``None``."""
        start = self._start[1]
        upload = require_record(reply.content, ARRAYS, ArrayRecord)
        got = require_record(reply.content, DELTA, ArrayRecord)
        k = float(require_record(reply.content, METRICS, MetricRecord)[STEPS])
        diff_sq = drift_sq = c_sq = 0.0
        for key, ck in self.control_of(start).items():
            x = array_numpy(start[key]).astype(np.float64)
            drift = (x - array_numpy(upload[key]).astype(np.float64)) / (k * self.cfg.lr)
            diff_sq += float(((array_numpy(got[key]) - (drift - ck)) ** 2).sum())
            drift_sq += float((drift**2).sum())
            c_sq += float((ck**2).sum())
        tolerance = DELTA_TOLERANCE * (drift_sq**0.5 + c_sq**0.5) + 1e-6
        if diff_sq**0.5 > tolerance:
            return (
                f"{DELTA}: differs from (x - y)/(K lr) - c of its own upload by "
                f"{diff_sq**0.5:.3g} (tolerance {tolerance:.3g})"
            )
        return None

    # -- aggregation ---------------------------------------------------------------------------
    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)
        mean, metrics = super().aggregate_train(server_round, replies)
        start = self.start_of_round(server_round, replies)
        keys = float_keys(start)
        if self.server_lr != 1.0:
            step = {
                k: array_numpy(start[k]).astype(np.float64)
                + self.server_lr
                * (
                    array_numpy(mean[k]).astype(np.float64)
                    - array_numpy(start[k]).astype(np.float64)
                )
                for k in keys
            }
            mean = ArrayRecord(
                {
                    k: array_of(step[k].astype(array_numpy(start[k]).dtype))
                    if k in step
                    else mean[k]
                    for k in mean.keys()
                }
            )
        c = self.control_of(start)
        population = max(len(self.nodes), len(replies))
        for r in replies:
            delta = require_record(r.content, DELTA, ArrayRecord)
            for k in keys:
                c[k] = c[k] + array_numpy(delta[k]).astype(np.float64) / population
        self.control = flat(c, keys) if keys else None
        self.control_norm = float(np.linalg.norm(self.control)) if keys else 0.0
        return mean, metrics

    def server_probes(self, server_round: int) -> dict[str, float]:
        return {f"{self.probe_prefix}.control-norm": self.control_norm}

    def idle_probes(self, server_round: int) -> tuple[str, ...]:
        """In round 1 :math:`c = c_i = 0`: no correction, by design."""
        return (f"{self.probe_prefix}.correction",) if server_round == 1 else ()
