r"""FedLoG server (Kim et al., "Subgraph Federated Learning for Local Generalization", ICLR
2025), following the official code's ``Server.update``.

After each round it

* averages the clients' shared weights (embedder, classifier, branches) with FedAvg's rule;
  the code's mean is unweighted (``agg-weight = uniform``, FedLoG's default);
* builds the **global synthetic nodes**: each client's head synthetic nodes ``[C, k, F]`` with
  their ``k`` slots permuted (one random permutation per client, the same for every class),
  then per class the clients' class-rate-weighted sum

  .. math::
      \mathbf X^{g}_{c} = \sum_m \frac{r_{m,c}}{\sum_{m'} r_{m',c}}\, \mathbf X^{m}_{c,\pi_m},

  (a class no client trains on: the plain mean), ``C k`` nodes labelled class-major;
* once, from the first round's uploads, the **per-class neighbour generators**: per class the
  class-rate-weighted average of the clients' pretrained generators. (The code's server sets
  out to do this but fills one list it keeps reusing, so every class would get the last
  class's average; and no client loads them, ``generators = official``.)

The next round's train message carries the averaged weights, the global synthetic nodes
(:data:`~fgl_flower.methods.fedlog.GLOBAL`) and the generators
(:data:`~fgl_flower.methods.fedlog.CLASS_GENERATORS`, ``[C, parameters]``; not with
``generators = official``, whose clients never load them). Clients evaluate their own trained
model in the train reply (:attr:`evaluates_in_train`).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord

from fgl_flower.methods.fedlog import CLASS_GENERATORS, GENERATOR, GLOBAL, SYNTHETIC, FedLoGOptions
from fgl_flower.protocol import ARRAYS
from fgl_flower.records import array_numpy, get_record, require_record
from fgl_flower.seeds import derive_seed
from fgl_flower.strategies.fedavg import FedAvgStrategy
from fgl_flower.strategies.screening import shares_problem, values_of


def class_weights(rates: np.ndarray) -> np.ndarray:
    """``[M, C]`` class rates -> per class, the clients' share ``r_mc / sum_m r_mc`` (a class
    without any: ``1/M``)."""
    total = rates.sum(axis=0, keepdims=True)
    out = np.full_like(rates, 1.0 / rates.shape[0], dtype=np.float64)
    np.divide(rates, total, out=out, where=total > 0)
    return out


def global_synthetic(syn: np.ndarray, rates: np.ndarray, perms: np.ndarray) -> np.ndarray:
    """``syn [M, C, k, F]``, ``rates [M, C]``, ``perms [M, k]`` -> ``[C, k, F]``."""
    permuted = np.stack([s[:, p] for s, p in zip(syn, perms)]).astype(np.float64)
    return np.einsum("mc,mckf->ckf", class_weights(rates), permuted)


class FedLoGStrategy(FedAvgStrategy):
    """FedAvg's mean of the shared weights plus the global synthetic nodes and the per-class
    generators (module doc), sent with the next round's train message."""

    evaluates_in_train = True

    checkpointed = FedAvgStrategy.checkpointed + ("global_x", "global_y", "generators")

    checked_uploads = {MessageType.TRAIN: (ARRAYS, SYNTHETIC)}

    def reply_problem(self, server_round: int, reply: Message) -> str | None:
        """The class rates (the synthetic nodes' weights) must be shares of one whole."""
        if reply.metadata.message_type != MessageType.TRAIN:
            return None
        return shares_problem(
            values_of(get_record(reply.content, SYNTHETIC, ArrayRecord), "class-rate"),
            f"{SYNTHETIC}/class-rate",
        )

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        self.opts = FedLoGOptions.from_config(cfg)
        self.global_x: np.ndarray | None = None  # [C k, F]
        self.global_y: np.ndarray | None = None  # [C k]
        self.generators: np.ndarray | None = None  # [C, parameters]

    def uploads_model(self, server_round: int) -> bool:
        """The last round's clients upload nothing: no round follows to use it."""
        return server_round < self.cfg.num_rounds

    def idle_probes(self, server_round: int) -> tuple[str, ...]:
        """Round 1 has no global synthetic data yet: its zero share is recorded, not watched."""
        return ("fedlog.cd-share",) if server_round == 1 else ()

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid
    ) -> Iterable[Message]:
        content = self.round_content(server_round, arrays, config)
        if self.global_x is not None:
            content[GLOBAL] = ArrayRecord({"x": Array(self.global_x), "y": Array(self.global_y)})
            if self.opts.generators == "server" and self.generators is not None:
                content[CLASS_GENERATORS] = ArrayRecord({"weights": Array(self.generators)})
        return self.broadcast(content, MessageType.TRAIN)

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)
        if not any(len(require_record(r.content, ARRAYS, ArrayRecord)) for r in replies):
            return None, self.aggregate_train_metrics(replies)  # the last round uploads nothing
        mean, metrics = super().aggregate_train(server_round, replies)
        uploads = [require_record(r.content, SYNTHETIC, ArrayRecord) for r in replies]
        rates = np.stack([array_numpy(u["class-rate"]) for u in uploads]).astype(np.float64)
        classes, k = rates.shape[1], self.opts.num_proto
        syn = np.stack([array_numpy(u["syn-head"]).reshape(classes, k, -1) for u in uploads])
        rng = np.random.default_rng(derive_seed(self.cfg.seed, server_round, "fedlog-permutation"))
        perms = np.stack([rng.permutation(k) for _ in uploads])
        self.global_x = (
            global_synthetic(syn, rates, perms).reshape(classes * k, -1).astype(np.float32)
        )
        self.global_y = np.repeat(np.arange(classes, dtype=np.int64), k)
        gens = [get_record(r.content, GENERATOR, ArrayRecord) for r in replies]
        if self.generators is None and all(g is not None for g in gens):
            flat = np.stack(
                [
                    np.concatenate([array_numpy(g[key]).reshape(-1) for key in g.keys()])
                    for g in gens
                ]
            )
            self.generators = (class_weights(rates).T @ flat.astype(np.float64)).astype(np.float32)
        return mean, metrics
