"""Client base classes.

A method's client receives the content of one Flower message and returns the content of
the reply; the ClientApp (:mod:`fgl_flower.client_app`) does the plumbing: it parses the
run config, loads this partition's data, wraps ``context.state`` and picks the class from
the method registry.
"""

from __future__ import annotations

import itertools

import torch
from flwr.app import ArrayRecord, MetricRecord, RecordDict

from fgl_flower.clients.learner import Learner, ModelBuilder, make_learner
from fgl_flower.clients.state import ClientState
from fgl_flower.config import RunConfig
from fgl_flower.datasets import GraphClientData, NodeClientData
from fgl_flower.datasets.client_data import LinkClientData
from fgl_flower.device import manual_seed, resolve_device
from fgl_flower.dp.options import dp_settings
from fgl_flower.errors import FGLError
from fgl_flower.probes import as_metrics
from fgl_flower.protocol import ARRAYS, METRICS, NUM_EXAMPLES, PARTITION_ID, START
from fgl_flower.records import get_record, record_torch, torch_record
from fgl_flower.seeds import derive_seed

__all__ = ["FGLClient", "LearnerClient", "derive_seed"]

#: State key marking that this client reported its resources in this run.
RESOURCES_REPORTED = "fgl.resources-reported"


class FGLClient:
    """Base of all clients: state in :class:`ClientState`.

    An instance serves one message, or, reused by the ClientApp
    (:class:`~fgl_flower.client_app.LiveClients`), the node's next messages while the state
    it saved comes back unchanged: anything the next message needs must be in the state,
    and :meth:`refresh` resets what a fresh instance would not restore from it.

    ``self.device`` is the run's ``device`` resolved in this process; node data arrive on
    it (``self.data``), and everything a client computes stays there. State and replies
    are copied back to the CPU.

    Subclasses implement :meth:`train` and :meth:`evaluate`, and :meth:`query` for the
    actions their :class:`~fgl_flower.methods.MethodSpec` lists in ``query_actions``
    (routed as ``query.<action>`` messages).
    """

    def __init__(
        self,
        cfg: RunConfig,
        data: NodeClientData | GraphClientData | LinkClientData,
        state: ClientState,
        partition_id: int,
    ) -> None:
        self.cfg = cfg
        self.device = resolve_device(cfg.device)
        self.data = (
            data.to(self.device) if isinstance(data, (NodeClientData, LinkClientData)) else data
        )
        self.state = state
        self.partition_id = partition_id

    def refresh(self) -> None:
        """Called before a reused instance serves another message: reset what a fresh
        instance would not restore from ``self.state`` (default: nothing)."""

    def check_can_train(self) -> None:
        """Stop with a clear message when this client has no training example: a loss over
        none is NaN, which would otherwise surface as a diverged learning rate."""
        if self.data.num_train == 0:
            raise FGLError(
                f"Partition {self.partition_id} has no training {self.data.kind} (of its "
                f"{self.data.num_local}; split="
                f"{','.join(f'{r:g}' for r in self.cfg.split)}, split-mode={self.cfg.split_mode}), so it "
                "cannot train. Raise the train ratio, use split-mode=stratified, or use fewer clients."
            )

    def seed_round(self, server_round: int, phase: str = "train") -> None:
        """Seed torch for this client, round and phase (reproducible, distinct per client)."""
        manual_seed(derive_seed(self.cfg.seed, self.partition_id, server_round, phase), self.device)

    def eval_dropout(self) -> bool:
        """Whether evaluations keep dropout active (run option ``eval-dropout``)."""
        return self.cfg.eval_dropout

    def evaluate_learner(self, learner: Learner, server_round: int) -> dict[str, float]:
        """``learner.evaluate()`` as the run asks: with :meth:`eval_dropout`, the model in
        train mode with its dropout masks seeded for this client and round (so reused and
        rebuilt clients, and every runtime, draw the same masks), else in eval mode."""
        if not self.eval_dropout():
            return learner.evaluate()
        self.seed_round(server_round, "evaluate")
        return learner.evaluate(train_mode=True)

    def metrics(self, values: dict[str, float], num_examples: float) -> MetricRecord:
        """A MetricRecord tagged with this client's partition id and weight."""
        return MetricRecord(
            {**values, PARTITION_ID: self.partition_id, NUM_EXAMPLES: float(num_examples)}
        )

    def train(self, content: RecordDict, server_round: int) -> RecordDict:
        raise NotImplementedError(f"{type(self).__name__} does not train")

    def evaluate(self, content: RecordDict, server_round: int) -> RecordDict:
        raise NotImplementedError(f"{type(self).__name__} does not evaluate")

    def query(self, action: str, content: RecordDict) -> RecordDict:
        raise NotImplementedError(f"{type(self).__name__} answers no query {action!r}")


class LearnerClient(FGLClient):
    """A client that trains one :class:`Learner` whose state persists across rounds.

    A method with its own model overrides :meth:`model_builder` (and :meth:`shared_prefixes`
    to federate only part of it).
    """

    #: Whether the server needs the round's start model even without DP (FedNova): a round
    #: that received no global arrays sends it back (:data:`~fgl_flower.protocol.START`).
    sends_start: bool = False

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.learner: Learner = make_learner(
            self.cfg, self.data, self.device, self.model_builder(), self.shared_prefixes()
        )
        self.learner.restore(self.state)
        self._loaded: tuple | None = None  # (record, parameter versions, tensors) last loaded
        self.dp = dp_settings(self.cfg)  # client-level DP (fgl_flower.dp): None without
        self.global_received = False  # whether the last message carried global arrays

    def model_builder(self) -> ModelBuilder | None:
        """``build(num_features, num_classes)`` of this method's model (default ``None``:
        the run's ``model``)."""
        return None

    def shared_prefixes(self) -> tuple[str, ...] | None:
        """Prefixes of the parameters this method federates (default ``None``: all, or the
        backbone's ``shared_prefixes`` across datasets)."""
        return None

    def refresh(self) -> None:
        if not self.cfg.keep_optimizer_state:
            self.learner.reset_optimizer()
        # a new message: a server that sends the same record object again (a round that kept
        # its model) must find it loaded again, since the fused Adam kernel changes the
        # parameters without bumping their version counters
        self._loaded = None

    def load_global(self, content: RecordDict) -> dict[str, torch.Tensor]:
        """Load the server's arrays (if any) into the shared parameters; returns them.

        Loading the same record again within one message while the parameters are unchanged
        (a fused message evaluates, then trains from the same arrays) is skipped: in-place
        changes by autograd-tracked ops bump the tensors' version counters, and every new
        message loads afresh (:meth:`refresh`).
        """
        record = get_record(content, ARRAYS, ArrayRecord)
        self.global_received = record is not None and len(record) > 0
        if (
            record is not None
            and self._loaded is not None
            and self._loaded[0] is record
            and self._loaded[1] == self._shared_versions()
        ):
            return self._loaded[2]
        tensors = record_torch(record) if record is not None and len(record) else {}
        if tensors:
            self.learner.set_shared(tensors)
            self._loaded = (record, self._shared_versions(), tensors)
        return tensors

    def _shared_versions(self) -> tuple[int, ...]:
        model = self.learner.model
        return tuple(t._version for t in itertools.chain(model.parameters(), model.buffers()))

    def evaluation_reply(self, server_round: int) -> RecordDict:
        """The learner's evaluation (:meth:`evaluate_learner`) and this method's probes
        (:meth:`probe_metrics`, as ``probe.<name>``) as a reply."""
        res = self.evaluate_learner(self.learner, server_round)
        res.update(as_metrics(self.probe_metrics()))
        return RecordDict({METRICS: self.metrics(res, res["num-test"])})

    def probe_metrics(self) -> dict[str, float]:
        """The method's probes (:mod:`fgl_flower.probes`) measured on the model right after
        its evaluation, by name (default none)."""
        return {}

    def shared_snapshot(self) -> dict[str, torch.Tensor]:
        """A detached copy of the shared parameters as they are now (e.g. the round's start)."""
        return {k: v.detach().clone() for k, v in self.learner.get_shared().items()}

    def round_start(self) -> dict[str, torch.Tensor] | None:
        """A copy of the shared parameters the round starts from (call it after
        :meth:`load_global`) where the reply needs it: under client-level DP (the update is
        clipped against it), and in a round that received no global arrays when the server
        needs the start model (:attr:`sends_start`, or DP): ``None`` otherwise."""
        if self.dp is not None or (self.sends_start and not self.global_received):
            return self.shared_snapshot()
        return None

    def training_reply(
        self,
        train_metrics: dict[str, float],
        upload: bool = True,
        reference: dict[str, torch.Tensor] | None = None,
    ) -> RecordDict:
        """Persist the learner and reply with its shared arrays (or none); the client's
        first reply of a run also reports its resources (:mod:`~fgl_flower.clients.resources`).
        ``reference`` is the round's start (:meth:`round_start`): under DP the arrays are the
        clipped update's (:func:`~fgl_flower.dp.clipping.clipped_upload`, with its metrics),
        and in a round that received no global arrays the reply also carries it
        (:data:`~fgl_flower.protocol.START`) for a server that needs it."""
        if RESOURCES_REPORTED not in self.state:
            from fgl_flower.clients.resources import resource_metrics

            train_metrics = {
                **train_metrics,
                **resource_metrics(self.learner, self.cfg.local_epochs, upload),
            }
            self.state.set_json(RESOURCES_REPORTED, True)
        self.learner.save(self.state)
        shared = self.learner.get_shared() if upload else {}
        if upload and reference is not None and self.dp is not None:
            from fgl_flower.dp.clipping import clipped_upload

            shared, dp_metrics = clipped_upload(shared, reference, self.dp.clip)
            train_metrics = {**train_metrics, **dp_metrics}
        arrays = torch_record(shared) if upload else ArrayRecord()
        reply = RecordDict(
            {ARRAYS: arrays, METRICS: self.metrics(train_metrics, self.aggregation_weight())}
        )
        if (
            reference is not None
            and not self.global_received
            and (self.dp is not None or self.sends_start)
        ):
            reply[START] = torch_record(reference)
        return reply

    def aggregation_weight(self) -> float:
        """This client's ``num-examples``, its weight in the server's average (default: the
        learner's, set by ``agg-weight``)."""
        return float(self.learner.num_examples)
