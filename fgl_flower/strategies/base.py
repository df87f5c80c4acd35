"""Base strategy: Flower's Strategy interface plus what every FGL run needs.

:class:`FGLStrategy` keeps Flower's narrow interface (``configure_train``,
``aggregate_train``, ``configure_evaluate``, ``aggregate_evaluate``, ``summary``) and
runs it in :meth:`FGLStrategy.start`, a short loop of named steps over a
:class:`~fgl_flower.strategies.run_state.RunState` (:meth:`~FGLStrategy.open_run`, then per
round :meth:`~FGLStrategy.train_round`, :meth:`~FGLStrategy.evaluate_round`,
:meth:`~FGLStrategy.save_checkpoint`), which adds the cross-cutting pieces: a
:class:`~fgl_flower.strategies.grid.MeteredGrid` (bytes, deterministic reply order, node
discovery by partition id) whose every exchange is metered and screened
(:mod:`~fgl_flower.strategies.exchange`), client sampling (``fraction-train``, from the run
seed), fused evaluation, server checkpoints (:mod:`~fgl_flower.strategies.server_state`) and a
:class:`~fgl_flower.results.RunRecorder` (per-round records, summary, curves). A method
overrides only the aggregation it changes; a one-shot or multi-phase method overrides
:meth:`start`, reusing :meth:`~FGLStrategy.open_run` and the exchange.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from logging import INFO, WARNING

from flwr.app import (
    ArrayRecord,
    ConfigRecord,
    Message,
    MessageType,
    MetricRecord,
    RecordDict,
)
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Result, Strategy
from flwr.supercore import log

from fgl_flower.checkpoint import Checkpointer
from fgl_flower.config import RunConfig
from fgl_flower.datasets.resolve import run_task
from fgl_flower.errors import DivergedError
from fgl_flower.metrics import summarize_clients
from fgl_flower.probes import PROBE, Probe, ProbeWatch, collect_probes, summarize_probe
from fgl_flower.protocol import (
    ARRAYS,
    CONFIG,
    EVALUATE_ROUND,
    EVALUATION,
    METRICS,
    NUM_EXAMPLES,
    NUM_LOCAL,
    PARTITION_ID,
    RESOURCES,
    RESUME_ROUND,
    SERVER_ROUND,
)
from fgl_flower.records import get_record, require_record
from fgl_flower.results import RunRecorder
from fgl_flower.strategies.exchange import exchange, failure_list
from fgl_flower.strategies.grid import ClientFailure, MeteredGrid, reply_partition_id
from fgl_flower.strategies.run_state import RunState
from fgl_flower.strategies.sampling import sample_clients, sample_size
from fgl_flower.strategies.screening import (
    Layout,
    array_problems,
    layout_of,
    layout_problem,
    majority,
    metric_problems,
    minority,
    weight_problem,
)
from fgl_flower.strategies.server_state import PENDING_ARRAYS, ServerState, pack_state, unpack_state


def evaluation_replies(replies: Iterable[Message]) -> list[Message]:
    """The evaluations that fused train replies carry (:data:`EVALUATION`), as evaluate
    replies (their ``metrics`` record) for :meth:`FGLStrategy.aggregate_evaluate`."""
    return [
        Message(
            content=RecordDict({METRICS: evaluation}),
            dst_node_id=r.metadata.src_node_id,
            message_type=MessageType.EVALUATE,
        )
        for r in replies
        if (evaluation := get_record(r.content, EVALUATION, MetricRecord)) is not None
    ]


def nonfinite_metrics(reply: Message) -> list[str]:
    """``["train_loss=nan", ...]``: the NaN or infinite values of a reply's metric records
    (probes aside: a probe may be undefined, e.g. the homophily of an empty graph; and the
    weight, ``num-examples``, which no training computes: the server refuses a bad one,
    :meth:`FGLStrategy.screen`)."""
    return [
        f"{k}={v}"
        for rec in reply.content.values()
        if isinstance(rec, MetricRecord)
        for k, v in rec.items()
        if isinstance(v, float)
        and not math.isfinite(v)
        and not k.startswith(PROBE)
        and k != NUM_EXAMPLES
    ]


def client_resources(replies: Iterable[Message]) -> dict[str, dict[str, float]]:
    """``{partition id: {"params": ..., "shared-params": ..., "flops": ...}}`` from the
    replies that report resources (each client's first train reply of a run)."""
    out = {}
    for pid, m in client_metrics(replies).items():
        res = {k[len(RESOURCES) :]: v for k, v in m.items() if k.startswith(RESOURCES)}
        if res:
            out[str(pid)] = res
    return out


def client_metrics(replies: Iterable[Message], probes: bool = False) -> dict[int, dict[str, float]]:
    """``{partition id: metrics}`` from the ``metrics`` record of each reply, without the
    probe values (``probe.*``, see :mod:`fgl_flower.probes`) unless ``probes``."""
    out = {}
    for r in replies:
        rec = require_record(r.content, METRICS, MetricRecord)
        out[int(rec[PARTITION_ID])] = {
            k: float(v) for k, v in rec.items() if probes or not k.startswith(PROBE)
        }
    return out


class FGLStrategy(Strategy):
    """Strategy base for all methods of this package.

    Every round the clients sampled for it (``fraction-train``, ``min-train-clients``; all
    by default) train, and the global model they produce is evaluated on the clients
    sampled for the next round (the ones that receive it next; for the last round, a
    sample drawn as for round ``R + 1``). Replies are processed in partition-id order.
    """

    #: ``True`` for methods whose evaluated model does not change in aggregation (e.g.
    #: personalized models): clients put the evaluation metrics into the train reply and
    #: no evaluate messages are sent; the evaluation covers the round's trained clients.
    evaluates_in_train: bool = False
    #: ``True`` for methods whose evaluate message of round ``r`` carries only what round
    #: ``r + 1``'s train message carries (the global arrays), and whose clients' evaluate
    #: changes nothing that train reads: the evaluation then rides in that train message
    #: (``fused-evaluation``), halving the messages, with the same numbers.
    evaluate_with_next_train: bool = False

    #: Evaluation metrics the method adds to its task's (:attr:`~fgl_flower.tasks.Task.
    #: eval_metrics`), with the count each is weighted by (e.g. GCFL's ``test_acc_gcfl``).
    extra_eval_metrics: dict[str, str] = {}

    #: Attributes that hold server state across rounds (arrays, tensors or ``None``), kept
    #: in the run's checkpoint besides the global arrays (e.g. FedSpray's proxies).
    checkpointed: tuple[str, ...] = ()

    #: The records a reply to each message type must carry because the server aggregates
    #: them, each with the layout (keys, dtypes, shapes) of its reference (:meth:`screen`),
    #: e.g. ``{"train": ("arrays",)}``.
    checked_uploads: dict[str, tuple[str, ...]] = {}

    def __init__(self, cfg: RunConfig) -> None:
        self.cfg = cfg
        self.task = run_task(cfg)
        #: per-client evaluation metrics summarized each round, and the count each is weighted by
        self.eval_metrics = {**self.task.eval_metrics, **self.extra_eval_metrics}
        self.node_ids: list[int] = []  # the nodes that the next broadcast addresses
        self.nodes: dict[int, int] = {}  # partition id -> node id (from discovery)
        self.selected: list[int] = []  # the partition ids of node_ids
        self.probe_watch = ProbeWatch(())  # the method's probes: :meth:`watch`
        #: the layout each checked upload had to have in the last round that set one
        self.upload_layouts: dict[str, Layout] = {}

    def watch(self, probes: Iterable[Probe]) -> FGLStrategy:
        """Warn when one of ``probes`` (the method's, from its spec) dies; returns ``self``.
        :meth:`~fgl_flower.methods.spec.MethodSpec.build_strategy` calls it."""
        self.probe_watch = ProbeWatch(probes)
        return self

    # -- message construction --------------------------------------------------------------
    def broadcast(
        self, content: RecordDict, message_type: str, node_ids: Iterable[int] | None = None
    ) -> list[Message]:
        """One message with ``content`` to each node (all selected nodes by default)."""
        ids = self.node_ids if node_ids is None else list(node_ids)
        return [Message(content=content, message_type=message_type, dst_node_id=n) for n in ids]

    def per_client(
        self,
        server_round: int,
        config: ConfigRecord,
        message_type: str,
        arrays_of: Callable[[int], ArrayRecord],
    ) -> list[Message]:
        """One message to each selected node with its own arrays, ``arrays_of(partition id)``
        (GCFL's cluster model, FED-PUB's personalised one)."""
        return [
            m
            for pid, node in zip(self.selected, self.node_ids)
            for m in self.broadcast(
                self.round_content(server_round, arrays_of(pid), config), message_type, [node]
            )
        ]

    def round_content(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord
    ) -> RecordDict:
        cfg = ConfigRecord(dict(config))
        cfg[SERVER_ROUND] = server_round
        return RecordDict({ARRAYS: arrays, CONFIG: cfg})

    # -- Flower Strategy interface ---------------------------------------------------------
    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        return self.broadcast(self.round_content(server_round, arrays, config), MessageType.TRAIN)

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Default: no new global arrays; train metrics weighted by ``num-examples``."""
        return None, self.aggregate_train_metrics(replies)

    def aggregate_train_metrics(self, replies: Iterable[Message]) -> MetricRecord:
        """The train metrics' mean over ``replies``, each weighted by :meth:`reply_weight`."""
        replies = list(replies)
        per_client = list(client_metrics(replies).values())
        weights = [self.reply_weight(r) for r in replies]
        keys = sorted(
            k
            for k in {k for m in per_client for k in m} - {PARTITION_ID, NUM_EXAMPLES}
            if k not in self.eval_metrics
            and not k.startswith(("num-", RESOURCES))  # evaluation rides along
        )
        total = sum(weights) or 1.0
        return MetricRecord(
            {k: sum(w * m.get(k, 0.0) for w, m in zip(weights, per_client)) / total for k in keys}
        )

    def reply_weight(self, reply: Message) -> float:
        """A train reply's weight, decided by the server where it can be: 1 under
        ``agg-weight = uniform`` (which DP requires), whatever the client reports; else the
        client's ``num-examples`` (:meth:`screen` has refused any that is not a whole number
        from 1 to :data:`~fgl_flower.strategies.screening.MAX_EXAMPLES`)."""
        if self.cfg.agg_weight == "uniform":
            return 1.0
        return float(require_record(reply.content, METRICS, MetricRecord)[NUM_EXAMPLES])

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        return self.broadcast(
            self.round_content(server_round, arrays, config), MessageType.EVALUATE
        )

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord:
        """Weighted mean, mean, std and worst client of every evaluation metric.

        The weight is the metric's own count (``eval-weight=split``: pooled over the
        clients' val/test examples), the client's size (``client-size``: ``num-local``) or 1
        (``client``: the unweighted client mean, e.g. FedHERO's model selection).
        """
        per_client = self.eval_client_metrics(replies)
        return MetricRecord(self.aggregate_evaluate_values(list(per_client.values())))

    def eval_client_metrics(self, replies: Iterable[Message]) -> dict[int, dict[str, float]]:
        """Each client's evaluation metrics as a round records them (``clients`` in
        ``rounds.jsonl``, ``final_clients``): its reply's, plus what the strategy derives per
        client (e.g. GCFL's ``test_acc_gcfl``); no side effects."""
        return client_metrics(replies)

    def aggregate_evaluate_values(self, per_client: list[dict[str, float]]) -> dict[str, float]:
        """:meth:`aggregate_evaluate` on per-client metric dicts."""
        metrics = [m for m in self.eval_metrics if all(m in c for c in per_client)]
        weights = {
            "split": self.eval_metrics,
            "client-size": dict.fromkeys(self.eval_metrics, NUM_LOCAL),
            "client": dict.fromkeys(self.eval_metrics),
        }[self.cfg.eval_weight]
        return summarize_clients(per_client, metrics, weights, count_key=self.eval_metrics)

    def prepare_round(
        self,
        server_round: int,
        config: ConfigRecord,
        send: Callable[[list[Message]], list[Message]],
    ) -> None:
        """Extra exchanges before this round's train messages, on the clients selected for
        it (e.g. FedSage+'s generator queries): ``send(messages)`` returns the replies and
        meters them into the round's record (its bytes, messages and time). ``config`` is the
        round's train config: its messages carry it too, so that on a resumed run a client
        restores its checkpoint at the first of them. Default none."""

    def finish_round(
        self,
        server_round: int,
        replies: list[Message],
        send: Callable[[list[Message]], list[Message]],
    ) -> None:
        """Extra exchanges after this round's train replies, before their aggregation
        (e.g. SecAgg+'s unmask stage), metered into the round's record as
        :meth:`prepare_round`'s. Default none."""

    def evaluates(self, server_round: int) -> bool:
        """Whether ``server_round``'s model is evaluated (default every round). A round that
        trains no model to evaluate (e.g. FedSage+'s generator rounds) asks no client for an
        evaluation, and its record has none, so it takes no part in the best-validation
        choice nor in the last rounds' means."""
        return True

    def round_record(self, server_round: int) -> dict:
        """Extra fields of this round's record in ``rounds.jsonl``, read after its
        aggregation (e.g. GCFL's clusters; default none)."""
        return {}

    def server_probes(self, server_round: int) -> dict[str, float]:
        """Probe values the server measures itself after this round's aggregation (e.g.
        GCFL's number of clusters), recorded as the client ``server`` (default none)."""
        return {}

    def record_probes(
        self, record: dict, replies: Iterable[Message], server: dict[str, float] | None = None
    ) -> None:
        """Add the probe values of ``replies`` (per client) and the ``server``'s own to the
        round record's ``probes``; a probe reported in both phases keeps the later
        (evaluation) values."""
        probes = collect_probes(client_metrics(replies, probes=True))
        probes.update({k: summarize_probe({"server": v}) for k, v in (server or {}).items()})
        if probes:
            record.setdefault("probes", {}).update(probes)

    def idle_probes(self, server_round: int) -> tuple[str, ...]:
        """Probes that are off by design in this round and so not watched (e.g. S2FGL's
        loss shares before their start round; default none)."""
        return ()

    def watch_probes(self, record: dict) -> None:
        """Warn when a declared probe of this round's record dies or comes back, and
        list the dead ones in the record (``probes_dead``)."""
        rnd = record["round"]
        for message in self.probe_watch.check(rnd, record.get("probes", {}), self.idle_probes(rnd)):
            log(WARNING, "%s", message)
        if dead := self.probe_watch.dead_now():
            record["probes_dead"] = dead

    def summary(self) -> None:
        c = self.cfg
        log(
            INFO,
            "%s: method=%s dataset=%s partition=%s clients=%d rounds=%d seed=%d model=%s",
            type(self).__name__,
            c.method,
            c.dataset,
            c.partition,
            c.num_clients,
            c.num_rounds,
            c.seed,
            c.model,
        )
        if c.fraction_train < 1.0:
            log(
                INFO,
                "Each round trains %d of %d clients (fraction-train=%g, sampled by partition "
                "id from seed %d)",
                sample_size(c.num_clients, c.fraction_train, c.min_train_clients),
                c.num_clients,
                c.fraction_train,
                c.seed,
            )

    def initial_arrays(self) -> ArrayRecord:
        """Arrays sent in round 1. Empty: clients build the initial model from the run
        seed, identically on every client, so nothing needs to be sent."""
        return ArrayRecord()

    def connect(self, grid: Grid) -> MeteredGrid:
        """Wrap ``grid`` to meter traffic, map partition ids to nodes (every client by
        default in :attr:`node_ids`) and log the run summary: the start of every protocol."""
        metered = MeteredGrid(grid, accept_failures=self.cfg.accept_failures)
        self.nodes = metered.discover(self.cfg.num_clients)
        self.node_ids = list(self.nodes.values())
        self.summary()
        return metered

    def train_clients(self, server_round: int) -> list[int]:
        """Partition ids sampled to train in ``server_round`` (all by default)."""
        c = self.cfg
        return sample_clients(
            c.num_clients, c.fraction_train, c.min_train_clients, c.seed, server_round
        )

    def select(self, partition_ids: Iterable[int]) -> list[int]:
        """Address the next broadcast to these clients; returns their node ids."""
        self.selected = list(partition_ids)
        self.node_ids = [self.nodes[p] for p in self.selected]
        return self.node_ids

    def drop_nonfinite(self, record: dict, replies: list[Message]) -> list[Message]:
        """``replies`` without those reporting a NaN or infinite metric (``on-nonfinite=skip``,
        recorded under ``nonfinite``); with ``on-nonfinite=stop`` any such reply, and with
        ``skip`` a round with no other reply, raises :class:`DivergedError`."""
        bad = {reply_partition_id(r): values for r in replies if (values := nonfinite_metrics(r))}
        if not bad:
            return replies
        which = "; ".join(f"partition {p}: {', '.join(v)}" for p, v in sorted(bad.items()))
        cause = (
            f"Training diverged: the learning rate (lr={self.cfg.lr:g}) is likely too large "
            f"for these features or this model; lower lr or normalize the features"
        )
        if self.cfg.on_nonfinite == "stop" or len(bad) == len(replies):
            also = (
                ""
                if self.cfg.on_nonfinite == "skip"
                else ", or set on-nonfinite=skip to leave such clients out"
            )
            raise DivergedError(
                f"Round {record['round']}: non-finite values from {which}. {cause}{also}."
            )
        log(WARNING, "Round %d: leaving out %s (non-finite). %s.", record["round"], which, cause)
        record.setdefault("nonfinite", {}).update({str(p): ", ".join(v) for p, v in bad.items()})
        return [r for r in replies if reply_partition_id(r) not in bad]

    # -- what the server accepts -----------------------------------------------------------
    def screen(
        self, server_round: int, messages: list[Message], replies: list[Message]
    ) -> dict[int, str]:
        """``{partition id: why}`` of the ``replies`` (to ``messages``) the server refuses
        (:mod:`~fgl_flower.strategies.screening`): unreadable, non-numeric or non-finite
        arrays; in a train reply, a weight that is not a whole number from 1 to 2^31 - 1;
        a record of :attr:`checked_uploads` missing or not in its reference's layout. A
        method with more to check extends it."""
        refused = self.screen_replies(replies)
        refused.update(self.screen_uploads(messages, replies, refused))
        refused.update(self.screen_own(server_round, replies, refused))
        return refused

    def screen_own(
        self, server_round: int, replies: list[Message], refused: dict[int, str]
    ) -> dict[int, str]:
        """:meth:`reply_problem` of each reply not ``refused`` yet."""
        return {
            p: why
            for r in replies
            if (p := reply_partition_id(r)) not in refused
            and (why := self.reply_problem(server_round, r)) is not None
        }

    def screen_agreement(
        self,
        replies: list[Message],
        refused: dict[int, str],
        kind: str,
        value_of: Callable[[Message], object],
        what: str,
    ) -> dict[int, str]:
        """Refuse the ``kind`` replies not ``refused`` yet whose ``value_of`` differs from the
        strict majority's (what every client knows alike, e.g. the dataset's dimensions)."""
        values = {
            reply_partition_id(r): value_of(r)
            for r in replies
            if r.metadata.message_type == kind and reply_partition_id(r) not in refused
        }
        try:
            return minority(values, what)
        except ValueError as e:
            raise ClientFailure(str(e)) from None

    def reply_problem(self, server_round: int, reply: Message) -> str | None:
        """Why a reply's method records (beyond layouts) cannot be used: a weight or count
        they carry out of range (e.g. FedSpray's class ratios); default none."""
        return None

    def screen_uploads(
        self,
        messages: list[Message],
        replies: list[Message],
        refused: dict[int, str],
        skip: tuple[tuple[str, str], ...] = (),
    ) -> dict[int, str]:
        """:meth:`screen_layouts` of every :attr:`checked_uploads` record but the
        ``(message type, record)`` pairs in ``skip`` (checked otherwise), on the replies
        not ``refused`` yet."""
        out: dict[int, str] = {}
        sent = self.sent_by_partition(messages)
        for kind, names in self.checked_uploads.items():
            names = tuple(n for n in names if (kind, n) not in skip)
            of_kind = [
                r
                for r in replies
                if r.metadata.message_type == kind
                and reply_partition_id(r) not in refused
                and reply_partition_id(r) not in out
            ]
            if of_kind and names:
                out.update(self.screen_layouts(of_kind, sent, names))
        return out

    def screen_replies(self, replies: list[Message]) -> dict[int, str]:
        """The checks every reply gets: its arrays, its metric records (a train or evaluate
        reply must have one; :func:`~fgl_flower.strategies.screening.metric_problems`), and a
        train reply's weight."""
        refused = {}
        for r in replies:
            pid, kind = reply_partition_id(r), r.metadata.message_type
            why = array_problems(r.content)
            for name in (METRICS, EVALUATION):
                metrics = get_record(r.content, name, MetricRecord)
                if why is None and (
                    metrics is not None
                    or (name == METRICS and kind in (MessageType.TRAIN, MessageType.EVALUATE))
                ):
                    why = metric_problems(name, metrics, pid)
            if why is None and kind == MessageType.TRAIN:
                why = weight_problem(get_record(r.content, METRICS, MetricRecord))
            if why is not None:
                refused[pid] = why
        return refused

    def sent_by_partition(self, messages: list[Message]) -> dict[int, Message]:
        """``{partition id: the message sent to it}``."""
        partition_of = {node: pid for pid, node in self.nodes.items()}
        return {
            partition_of[m.metadata.dst_node_id]: m
            for m in messages
            if m.metadata.dst_node_id in partition_of
        }

    def upload_reference(self, name: str, message: Message | None) -> ArrayRecord | None:
        """The record whose layout a train reply's ``name`` upload must have: by default
        what ``message`` sent under that name (``None`` when it sent none, or an empty one,
        as round 1 of the FedAvg family, whose clients build the start model themselves)."""
        record = None if message is None else get_record(message.content, name, ArrayRecord)
        return record if record is not None and len(record) else None

    def screen_layouts(
        self, replies: list[Message], sent: dict[int, Message], names: Iterable[str]
    ) -> dict[int, str]:
        """Refuse the ``replies`` whose records ``names`` are missing or differ in layout
        from their reference: :meth:`upload_reference`, else the layout of an earlier
        round, else the one a strict majority of these replies share (none: the round
        stops, since nothing tells the honest clients apart)."""
        refused: dict[int, str] = {}
        for name in names:
            got = {
                reply_partition_id(r): layout_of(rec)
                for r in replies
                if (rec := get_record(r.content, name, ArrayRecord)) is not None
            }
            missing = [reply_partition_id(r) for r in replies if reply_partition_id(r) not in got]
            refused.update({p: f"no {name!r} record" for p in missing})
            refs = {
                p: ref for p in got if (ref := self.upload_reference(name, sent.get(p))) is not None
            }
            want = (
                layout_of(next(iter(refs.values())))
                if refs
                else self.upload_layouts.get(name) or majority(list(got.values()))
            )
            if want is None and got:
                raise ClientFailure(
                    f"the clients' {name!r} uploads come in {len(set(got.values()))} layouts "
                    f"and no majority of the {len(got)} shares one; nothing tells the honest "
                    "ones apart"
                )
            for p, layout in got.items():
                expected = layout_of(refs[p]) if p in refs else want
                if (why := layout_problem(layout, expected)) is not None:
                    refused[p] = f"{name}: {why}"
            if want is not None:
                self.upload_layouts[name] = want
        return refused

    # -- checkpoints -----------------------------------------------------------------------
    def checkpoint_records(
        self, server_round: int, arrays: ArrayRecord, pending: dict | None
    ) -> RecordDict:
        """The server's state after ``server_round``: what :meth:`restore` needs (the global
        ``arrays``, the :attr:`checkpointed` attributes, the config, the ``pending`` record,
        the dead probes; :func:`~fgl_flower.strategies.server_state.pack_state`)."""
        return pack_state(
            ServerState(
                round=server_round,
                arrays=arrays,
                config=dict(self.cfg.raw),
                pending=pending,
                attributes={name: getattr(self, name) for name in self.checkpointed},
                probes_dead=self.probe_watch.state(),
            )
        )

    def restore(self, records: RecordDict) -> tuple[int, ArrayRecord, dict | None]:
        """Load a checkpoint of this run's config (else :class:`ConfigError`;
        :func:`~fgl_flower.strategies.server_state.unpack_state`) into the strategy's
        attributes and probe watch: ``(its round, the global arrays, the pending record)``."""
        state = unpack_state(records, self.cfg.raw)
        for name, value in state.attributes.items():
            setattr(self, name, value)
        self.probe_watch.load_state(state.probes_dead)
        return state.round, state.arrays, state.pending

    # -- the round loop --------------------------------------------------------------------
    def start(
        self,
        grid: Grid,
        initial_arrays: ArrayRecord | None = None,
        num_rounds: int | None = None,
        timeout: float = 3600,
        train_config: ConfigRecord | None = None,
        evaluate_config: ConfigRecord | None = None,
        evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None,
        recorder: RunRecorder | None = None,
        checkpointer: Checkpointer | None = None,
    ) -> Result:
        """Run ``num_rounds`` rounds of train + evaluate on the sampled clients.

        Each round goes to ``recorder`` (if given) once its evaluation is in: right after
        the round, or, with fused evaluation, after the next round's train replies. With a
        ``checkpointer`` the server checkpoints its state after every ``checkpoint-every``
        rounds and the clients theirs after each train message; ``resume=true`` continues
        from the checkpoint, with the numbers of an uninterrupted run.

        The steps: :meth:`open_run`, then for each round :meth:`train_round`,
        :meth:`evaluate_round` (which records it, :meth:`record_evaluation`) and
        :meth:`save_checkpoint`; every exchange of a round is a :meth:`round_exchange`. A
        ``STOP`` file in the run folder (:data:`~fgl_flower.results.STOP_FILE`) ends the run
        after the round in which it appears.
        """
        run = self.open_run(
            grid,
            initial_arrays,
            num_rounds,
            timeout,
            train_config,
            evaluate_config,
            evaluate_fn,
            recorder,
            checkpointer,
        )
        for rnd in range(run.first_round, run.num_rounds + 1):
            record, replies = self.train_round(run, rnd)
            self.evaluate_round(run, record, replies)
            self.save_checkpoint(run, rnd)
            if run.recorder is not None and run.recorder.stop_requested():
                log(INFO, "Stopping after round %d, as the run folder asks (STOP file)", rnd)
                break
        return run.result

    def open_run(
        self,
        grid: Grid,
        initial_arrays: ArrayRecord | None = None,
        num_rounds: int | None = None,
        timeout: float = 3600,
        train_config: ConfigRecord | None = None,
        evaluate_config: ConfigRecord | None = None,
        evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None,
        recorder: RunRecorder | None = None,
        checkpointer: Checkpointer | None = None,
    ) -> RunState:
        """The state a run starts with (:meth:`start`'s arguments): :meth:`connect`, the
        initial arrays (:meth:`initial_arrays` unless given) and copies of the message
        configs; then, with ``resume=true``, :meth:`resume_run`, else, with a
        ``checkpointer``, a round-0 checkpoint; and whether evaluation is fused."""
        metered = self.connect(grid)
        run = RunState(
            metered=metered,
            arrays=self.initial_arrays() if initial_arrays is None else initial_arrays,
            num_rounds=self.cfg.num_rounds if num_rounds is None else num_rounds,
            timeout=timeout,
            train_config=ConfigRecord(dict(train_config or {})),
            evaluate_config=ConfigRecord(dict(evaluate_config or {})),
            evaluate_fn=evaluate_fn,
            recorder=recorder,
            checkpointer=checkpointer,
        )
        if self.cfg.resume:
            self.resume_run(run)
        elif checkpointer is not None:  # round 0: the run can be resumed from its first round
            self.save_checkpoint(run, 0)
        run.fused = (
            self.evaluate_with_next_train
            and self.cfg.fused_evaluation
            and not self.evaluates_in_train
        )
        run.result.arrays = run.arrays
        return run

    def resume_run(self, run: RunState) -> None:
        """Continue ``run`` after the round of its checkpointer's checkpoint (``resume=true``;
        without a checkpointer there is none, and the run starts at round 1): the server's
        state back (:meth:`restore`), the recorder's later rounds dropped, and every message
        of the run carrying :data:`~fgl_flower.protocol.RESUME_ROUND`, so each client first
        restores its own checkpoint."""
        if run.checkpointer is None:
            return
        done, run.arrays, run.pending = self.restore(run.checkpointer.load())
        run.first_round = done + 1
        run.train_config[RESUME_ROUND] = run.evaluate_config[RESUME_ROUND] = done
        if run.recorder is not None:
            run.recorder.resume(
                run.pending["round"] if run.pending is not None else run.first_round
            )
        log(INFO, "Resuming after round %d (checkpoint in %s)", done, run.checkpointer.directory)

    def train_round(self, run: RunState, rnd: int) -> tuple[dict, list[Message]]:
        """Round ``rnd`` up to its evaluation: a look for new nodes if a client failed, the
        clients sampled (:meth:`train_clients`), :meth:`prepare_round`, the train batch
        (which brings the pending round's evaluation, recorded then), :meth:`finish_round`
        and :meth:`aggregate_train` into the new global arrays. Returns the round's record
        (its global arrays under ``_arrays`` until recorded) and the train replies."""
        record: dict = {"round": rnd}
        if run.lost_nodes:  # a client's node may have come back under a new id
            self.nodes = run.metered.rediscover(self.nodes, self.cfg.num_clients, run.timeout)
            run.lost_nodes = False
        clients = self.train_clients(rnd)
        self.select(clients)
        config = run.train_config
        if run.pending is not None:
            config = ConfigRecord({**run.train_config, EVALUATE_ROUND: run.pending["round"]})

        def send(messages: Iterable[Message]) -> list[Message]:
            return self.round_exchange(run, record, messages)

        self.prepare_round(rnd, run.train_config, send)
        replies = send(self.configure_train(rnd, run.arrays, config, run.metered))
        self.finish_round(rnd, replies, send)
        if run.pending is not None:
            self.record_evaluation(run, run.pending, evaluation_replies(replies))
            run.pending = None
        if resources := client_resources(replies):
            record["resources"] = resources
        t_server = time.perf_counter()
        new_arrays, train_metrics = self.aggregate_train(rnd, replies)
        # aggregation, and any server-side training
        record["server_time_s"] = time.perf_counter() - t_server
        if new_arrays is not None:
            run.arrays = run.result.arrays = new_arrays
        record["train"] = dict(train_metrics or {})
        record["train_clients"] = clients
        record.update(self.round_record(rnd))
        self.record_probes(record, replies, self.server_probes(rnd))
        record[PENDING_ARRAYS] = run.arrays
        if train_metrics is not None:
            run.result.train_metrics_clientapp[rnd] = train_metrics
        return record, replies

    def round_exchange(
        self, run: RunState, record: dict, messages: Iterable[Message]
    ) -> list[Message]:
        """One exchange of ``record``'s round (:func:`~fgl_flower.strategies.exchange.exchange`):
        the replies without the non-finite ones (:meth:`drop_nonfinite`) and those
        :meth:`screen` refuses. Its time and traffic are added to the record; failed clients
        go to its ``failures``, are logged, and make the next round look for new nodes."""
        rnd = record["round"]
        done = exchange(
            run.metered,
            messages,
            lambda sent, replies: self.screen(rnd, sent, replies),
            timeout=run.timeout,
            prefix=f"Round {rnd}: ",
            received=lambda replies: self.drop_nonfinite(record, replies),
        )
        record["time_s"] = record.get("time_s", 0.0) + done.time_s
        for key, value in done.traffic.items():
            record[key] = record.get(key, 0) + value
        if done.failures:
            run.lost_nodes = True
            record.setdefault("failures", {}).update(
                {str(p): why for p, why in done.failures.items()}
            )
            log(
                WARNING,
                "Round %d: %d client(s) failed, going on with the others: %s",
                rnd,
                len(done.failures),
                failure_list(done.failures),
            )
        return done.replies

    def evaluate_round(self, run: RunState, record: dict, replies: list[Message]) -> None:
        """The evaluation of ``record``'s round (train ``replies``), then its record
        (:meth:`record_evaluation`): none if :meth:`evaluates` says so; the train replies'
        own (:attr:`evaluates_in_train`); with fused evaluation, the next round's train
        replies (the record waits in ``run.pending``; the last round has no next one); else
        a separate evaluate batch on the clients that train next."""
        rnd = record["round"]
        if not self.evaluates(rnd):
            self.record_evaluation(run, record, None)
        elif self.evaluates_in_train:
            self.record_evaluation(run, record, replies)
        elif run.fused and rnd < run.num_rounds:
            run.pending = record
        else:  # a separate evaluate batch, on the clients that train next
            eval_clients = self.train_clients(rnd + 1)
            self.select(eval_clients)
            eval_replies = self.round_exchange(
                run,
                record,
                self.configure_evaluate(rnd, run.arrays, run.evaluate_config, run.metered),
            )
            self.record_evaluation(run, record, eval_replies)

    def record_evaluation(
        self, run: RunState, record: dict, eval_replies: list[Message] | None
    ) -> None:
        """Record the round with its evaluation (``None``: a round not evaluated, whose
        record has no ``eval`` and no client's): the aggregated and per-client metrics,
        the probes (watched), the server-side evaluation of its global arrays, into the
        run's result and recorder."""
        rnd = record["round"]
        eval_metrics = None if eval_replies is None else self.aggregate_evaluate(rnd, eval_replies)
        per_client = self.eval_client_metrics(eval_replies or [])
        if eval_replies is not None:
            record["eval"] = dict(eval_metrics or {})
        record["eval_clients"] = sorted(per_client)  # those sampled that replied
        record["clients"] = {str(k): v for k, v in per_client.items()}
        self.record_probes(record, eval_replies or [])
        self.watch_probes(record)
        round_arrays = record.pop(PENDING_ARRAYS)  # the global arrays after this round
        if (
            eval_replies is not None
            and run.evaluate_fn is not None
            and (res := run.evaluate_fn(rnd, round_arrays)) is not None
        ):
            record["server_eval"] = dict(res)
            run.result.evaluate_metrics_serverapp[rnd] = res
        if eval_metrics is not None:
            run.result.evaluate_metrics_clientapp[rnd] = eval_metrics
        if run.recorder is not None:
            run.recorder.record_round(record)

    def save_checkpoint(self, run: RunState, server_round: int) -> None:
        """Checkpoint the server's state after ``server_round`` (:meth:`checkpoint_records`)
        if the run has a checkpointer and it is due (``checkpoint-every``, the last round);
        round 0 is the start (:meth:`open_run`)."""
        checkpointer = run.checkpointer
        if checkpointer is not None and (
            server_round == 0 or checkpointer.due(server_round, run.num_rounds)
        ):
            checkpointer.save(self.checkpoint_records(server_round, run.arrays, run.pending))
