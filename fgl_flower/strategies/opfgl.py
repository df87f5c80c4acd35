r"""O-pFGL server: one upload, one download (spec §2.7-2.9, §3.2).

1. ``query.stats`` to every client; each replies with class-wise sums (``cnt``,
   ``present``, ``orig_cnt``, ``s1``, ``s2``).
2. The server adds them element-wise -- the only operation on client data: in clear
   (:func:`clear_sum`) or, with ``opfgl.secure-aggregation``, through SecAgg+
   (:mod:`fgl_flower.secagg`: three more exchanges, and the server sees only masked
   vectors) -- and :func:`pooled_statistics` turns the totals into global class means and
   stds (Eq. 9):

   .. math::
       \boldsymbol\mu^c=\frac{\sum_k \mathtt{s1}_k^c}{N^c},\qquad
       (\boldsymbol\sigma^c)^2=\frac{\sum_k\mathtt{s2}_k^c-N^c(\boldsymbol\mu^c)^2}{N^c-m_c}

3. The server condenses the pseudo-graph (:func:`~fgl_flower.models.opfgl.condense`) and
   sends it with a ``train`` message; clients personalise and reply with metrics only.

The round record lists bytes and messages of each phase; ``upload``/``download`` count the
protocol payloads (statistics up, pseudo-graph down); ``probes`` holds the pseudo-graph as
each client received it and the server's fit of it (:data:`fgl_flower.methods.opfgl.PROBES`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from logging import INFO, WARNING

import numpy as np
import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Result
from flwr.supercore import log
from torch import Tensor

from fgl_flower.allocator import retain_freed_memory
from fgl_flower.checkpoint import Checkpointer
from fgl_flower.device import resolve_device
from fgl_flower.errors import FGLError
from fgl_flower.methods.opfgl import HRE, PSEUDO_GRAPH, STAT_KEYS, STATS, OPFGLOptions
from fgl_flower.models.opfgl import (
    ClassStatistics,
    PseudoGraph,
    aligned_share,
    condense,
    synthetic_class_sizes,
)
from fgl_flower.protocol import CONFIG, METRICS, NUM_EXAMPLES, SERVER_ROUND
from fgl_flower.records import require_record
from fgl_flower.results import RunRecorder
from fgl_flower.secagg.server import SecAggPlusSettings, secure_sum
from fgl_flower.seeds import derive_seed
from fgl_flower.strategies.base import FGLStrategy, client_metrics
from fgl_flower.strategies.exchange import TRAFFIC, exchange, failure_list
from fgl_flower.strategies.grid import ClientFailure
from fgl_flower.strategies.run_state import RunState
from fgl_flower.strategies.screening import counts_problem


def clear_sum(records: Sequence[Mapping[str, Tensor]]) -> dict[str, Tensor]:
    """Element-wise sum of the clients' statistics records, received in clear (what
    ``opfgl.secure-aggregation`` computes without seeing any record)."""
    if not records:
        raise ValueError("clear_sum needs at least one record.")
    return {k: torch.stack([r[k].double() for r in records]).sum(0) for k in (*STAT_KEYS, HRE)}


def statistics_problem(
    stats: Mapping[str, Tensor], labelled: float, clients: int = 1
) -> str | None:
    """Why a statistics record (or the sum of ``clients`` of them, ``labelled`` their clients'
    labelled counts) cannot be counts of ``labelled`` labelled nodes, or ``None``."""
    counts = {k: stats[k].double().numpy() for k in ("cnt", "present", "orig_cnt", HRE)}
    for key, values in counts.items():
        if (why := counts_problem(values, f"stats/{key}")) is not None:
            return why
    cnt, present, orig, (added, correct) = (
        counts["cnt"],
        counts["present"],
        counts["orig_cnt"],
        counts[HRE],
    )
    if correct > added or (orig > cnt).any() or present.max(initial=0) > clients:
        return "stats: more correct, labelled or present than counted"
    if clients == 1 and not np.array_equal(present, (cnt >= 2).astype(present.dtype)):
        return "stats: present is not 1 exactly where a class counts two nodes or more"
    if orig.sum() > labelled or cnt.sum() > labelled + added:
        return f"stats: {orig.sum():g} labelled and {cnt.sum():g} counted nodes, {labelled:g} labelled reported"
    return None


def pooled_statistics(total: Mapping[str, Tensor]) -> ClassStatistics:
    """Global class statistics from summed uploads only (Eq. 9 with :math:`N^c - m_c`)."""
    n, m = total["cnt"], total["present"]
    has = n > 0
    safe_n = torch.where(has, n, torch.ones_like(n))[:, None]
    mean = torch.where(has[:, None], total["s1"] / safe_n, torch.zeros_like(total["s1"]))
    denom = torch.where(has, n - m, torch.ones_like(n)).clamp(min=1)[:, None]
    var = ((total["s2"] - n[:, None] * mean**2) / denom).clamp(min=0)
    return ClassStatistics(
        n, total["orig_cnt"], mean, var.sqrt() * has[:, None], n / n.sum().clamp(min=1)
    )


def hre_share(total: Mapping[str, Tensor]) -> float:
    """Nodes HRE added per labelled node, over the summed uploads (the ``hre.share`` probe):
    ``added / sum_c orig_cnt_c`` (0 when nothing was labelled)."""
    labelled = float(total["orig_cnt"].sum())
    return float(total[HRE][0]) / labelled if labelled > 0 else 0.0


class OPFGLStrategy(FGLStrategy):
    """One-shot: statistics up, pseudo-graph down, personalised models evaluated locally."""

    evaluates_in_train = True

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        self.opts = OPFGLOptions.from_config(cfg)
        # the clear statistics share one layout; masked ones are checked as SecAgg+ unmasks them
        self.checked_uploads = (
            {} if self.opts.secure_aggregation else {f"{MessageType.QUERY}.stats": (STATS,)}
        )
        self.refused: dict[int, str] = {}  # partition id -> why its masked statistics were left out

    def reply_problem(self, server_round: int, reply: Message) -> str | None:
        """Clear statistics must be consistent counts: whole numbers, ``present`` 1 exactly
        where ``cnt >= 2``, ``orig_cnt <= cnt``, HRE's correct <= added, and no more labelled
        nodes than the reply's ``num-examples`` (its labelled count) nor more nodes than those
        plus HRE's. (The counts themselves are the client's word.)"""
        if (
            reply.metadata.message_type != f"{MessageType.QUERY}.stats"
            or self.opts.secure_aggregation
        ):
            return None
        return statistics_problem(
            require_record(reply.content, STATS, ArrayRecord).to_torch_state_dict(),
            float(require_record(reply.content, METRICS, MetricRecord)[NUM_EXAMPLES]),
        )

    def idle_probes(self, server_round: int) -> tuple[str, ...]:
        """With ``opfgl.topk = 0`` HRE is off by choice: its share is recorded, not watched."""
        return ("hre.share",) if self.opts.topk == 0 else ()

    def num_features(self, dim: int) -> int:
        """Raw feature width :math:`f` from the statistics width :math:`(h+1)f`."""
        if dim % (self.opts.hops + 1):
            raise ValueError(f"Statistics of width {dim} do not fit hops={self.opts.hops}.")
        return dim // (self.opts.hops + 1)

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord:
        """The personalised models' metrics, plus ``global_*``: Stage 1's :math:`M_G` alone
        (the "global" ablation), aggregated with the same weights."""
        replies = list(replies)
        out = dict(super().aggregate_evaluate(server_round, replies))
        per_client = [
            {
                k.removeprefix("global_"): v
                for k, v in m.items()
                if k.startswith(("global_", "num-"))
            }
            for m in client_metrics(replies).values()
        ]
        out |= {f"global_{k}": v for k, v in self.aggregate_evaluate_values(per_client).items()}
        return MetricRecord(out)

    def sum_statistics(
        self, content: RecordDict, exchange: Callable[[str, list[Message]], list[Message]]
    ) -> dict[str, Tensor]:
        """The clients' statistics summed: asked for in clear (one ``stats`` phase), or through
        SecAgg+ (phases ``secagg-setup``, ``secagg-share-keys``, ``stats`` with the masked
        vectors, ``secagg-unmask``)."""
        query = f"{MessageType.QUERY}.stats"
        if not self.opts.secure_aggregation:
            replies = exchange("stats", self.broadcast(content, query))
            return clear_sum(
                [
                    require_record(r.content, STATS, ArrayRecord).to_torch_state_dict()
                    for r in replies
                ]
            )
        phases = iter(("secagg-setup", "secagg-share-keys", "stats", "secagg-unmask"))
        settings = SecAggPlusSettings(self.opts.secagg_shares, self.opts.secagg_fraction_bits)
        result = secure_sum(
            lambda messages: exchange(next(phases), messages),
            self.node_ids,
            content,
            "stats",
            STATS,
            settings,
            derive_seed(self.cfg.seed, "secagg"),
        )
        if result.dropped:
            log(
                INFO,
                "secure aggregation: %d client(s) dropped after sharing their keys; their masks "
                "were removed with the others' shares",
                len(result.dropped),
            )
        partition_of = {node: pid for pid, node in self.nodes.items()}
        self.refused = {partition_of.get(n, n): why for n, why in result.refused.items()}
        summed = [r for r in result.replies if r.metadata.src_node_id in result.summed]
        labelled = sum(
            float(require_record(r.content, METRICS, MetricRecord)[NUM_EXAMPLES]) for r in summed
        )
        if (why := statistics_problem(result.total, labelled, len(summed))) is not None:
            raise FGLError(
                f"O-pFGL: the secure sum of the statistics is not counts of the clients' "
                f"labelled nodes ({why}): a client masked statistics other than those it "
                "reports; the one shot cannot go on."
            )
        return result.total

    def build_pseudo_graph(self, stats: ClassStatistics) -> PseudoGraph:
        sizes = synthetic_class_sizes(stats, self.opts.nodes_per_class, self.opts.rate)
        opts = self.opts.condense_options()
        log(INFO, "pseudo-graph: optimising %d nodes for %d steps", sum(sizes), opts.steps)
        retain_freed_memory()  # the step's [n', n', f] temporaries: reuse, don't re-map them
        graph = condense(
            stats,
            sizes,
            self.num_features(stats.mean.size(1)),
            opts,
            derive_seed(self.cfg.seed, "condense"),
            progress=lambda t, loss: log(
                INFO, "pseudo-graph: step %d/%d loss %.4f", t, opts.steps, loss
            ),
            device=resolve_device(self.cfg.device),
        )
        log(
            INFO,
            "pseudo-graph: %d nodes %s, %d directed edges, loss %.4f -> %.4f",
            graph.y.numel(),
            sizes,
            graph.edge_index.size(1),
            graph.losses[0],
            graph.losses[-1],
        )
        return graph

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
        """The one shot: statistics up, pseudo-graph down. It has no round to resume
        after, so ``resume=true`` runs it again from the start (same numbers;
        :meth:`resume_run`). Each exchange is a phase (:meth:`phase_exchange`)."""
        run = self.open_run(grid, timeout=timeout, recorder=recorder, checkpointer=checkpointer)
        config = ConfigRecord({SERVER_ROUND: 1})
        phases: dict[str, dict[str, float]] = {}
        failures: dict[str, str] = {}

        def phase(name: str, messages: list[Message]) -> list[Message]:
            return self.phase_exchange(run, name, messages, phases, failures)

        t0 = time.perf_counter()
        total = self.sum_statistics(RecordDict({CONFIG: config}), phase)
        if self.refused:  # masked statistics left out of the sum: failed clients too
            failures.update({str(p): f"stats: refused: {why}" for p, why in self.refused.items()})
            log(
                WARNING,
                "O-pFGL: %d client(s)' masked statistics refused: %s",
                len(self.refused),
                failure_list(self.refused),
            )
            if len(failures) > self.cfg.accept_failures:
                raise ClientFailure(
                    f"O-pFGL stats phase: {len(failures)} clients failed (accept-failures="
                    f"{self.cfg.accept_failures}): "
                    + "; ".join(f"{k}: {v}" for k, v in failures.items())
                )
        stats = pooled_statistics(total)
        t = time.perf_counter()
        graph = self.build_pseudo_graph(stats)
        phases["condense"] = {"time_s": time.perf_counter() - t}
        download = ArrayRecord(
            {
                "x": graph.x,
                "edge_index": graph.edge_index,
                "edge_weight": graph.edge_weight,
                "y": graph.y,
            }
        )
        replies = phase(
            "personalize",
            self.broadcast(RecordDict({PSEUDO_GRAPH: download, CONFIG: config}), MessageType.TRAIN),
        )
        eval_metrics = self.aggregate_evaluate(1, replies)
        added, correct = (float(v) for v in total[HRE])
        record = {
            "round": 1,
            "time_s": time.perf_counter() - t0,
            **{k: sum(p.get(k, 0) for p in phases.values()) for k in TRAFFIC},
            # the protocol's payloads: statistics up, pseudo-graph down (one each per client)
            "upload": {
                "messages": phases["stats"]["messages_up"],
                "bytes": phases["stats"]["bytes_up"],
            },
            "download": {
                "messages": phases["personalize"]["messages_down"],
                "bytes": phases["personalize"]["bytes_down"],
            },
            "phases": phases,
            "pseudo_graph": {
                "nodes": graph.y.numel(),
                "edges": graph.edge_index.size(1),
                "condense_loss_first": graph.losses[0],
                "condense_loss_last": graph.losses[-1],
            },
            "hre": {"added": added, "precision": correct / added if added else None},
            "train": {},
            "eval": dict(eval_metrics),
            "clients": {str(k): v for k, v in client_metrics(replies).items()},
            **({"failures": failures} if failures else {}),
        }
        # the probes: the pseudo-graph each client received (its train reply), how far the
        # server's optimisation fitted it to the pooled statistics, and how much of it had any
        fit = graph.losses[-1] / graph.losses[0] if graph.losses[0] > 0 else 1.0
        self.record_probes(
            record,
            replies,
            {
                "pseudo.fit": fit,
                "pseudo.aligned": aligned_share(stats, graph.y),
                "hre.share": hre_share(total),
            },
        )
        self.watch_probes(record)
        if recorder is not None:
            recorder.record_round(record)
        run.result.evaluate_metrics_clientapp[1] = eval_metrics
        return run.result

    def resume_run(self, run: RunState) -> None:
        """The one shot has no round to resume after: ``resume=true`` runs it again from the
        start, with the recorder's rounds dropped, after a round-0 checkpoint as a new run's
        (what a later ``resume=true`` needs to start it again)."""
        if run.recorder is not None:
            run.recorder.resume(1)
        self.save_checkpoint(run, 0)

    def phase_exchange(
        self,
        run: RunState,
        name: str,
        messages: list[Message],
        phases: dict[str, dict[str, float]],
        failures: dict[str, str],
    ) -> list[Message]:
        """One exchange of the one shot, phase ``name``
        (:func:`~fgl_flower.strategies.exchange.exchange`; its replies screened as round 1's,
        non-finite metrics left to the screening): its time and traffic go to
        ``phases[name]``, its failed clients to ``failures`` (``"<name>: why"``)."""
        done = exchange(
            run.metered,
            messages,
            lambda sent, replies: self.screen(1, sent, replies),
            timeout=run.timeout,
            prefix=f"O-pFGL {name} phase: ",
        )
        phases[name] = {"time_s": done.time_s, **done.traffic}
        failures.update({str(p): f"{name}: {why}" for p, why in done.failures.items()})
        return done.replies
