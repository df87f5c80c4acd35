"""FedHERO client (spec §2-3): the dual-channel GNN of :mod:`fgl_flower.models.fedhero`,
of which only the global channel (``struct.*``, ``gconv.*``) travels by default.

Each round: load the global channel, one full-batch step (``local-epochs``) of
cross-entropy plus the latent-graph regulariser with the client's persistent Adam over all
its parameters, upload the shared prefixes (``fedhero.share``) weighted by the client's
number of nodes (all of them, spec §2.6).
"""

from __future__ import annotations

import torch
from flwr.app import RecordDict

from fgl_flower.clients.fedavg import FedAvgClient
from fgl_flower.clients.learner import ExtraLoss, ModelBuilder
from fgl_flower.errors import ConfigError
from fgl_flower.methods.fedhero import FedHEROOptions, shared_prefixes


class FedHEROClient(FedAvgClient):
    @property
    def options(self) -> FedHEROOptions:
        return FedHEROOptions.from_config(self.cfg)

    def model_builder(self) -> ModelBuilder:
        from fgl_flower.models.fedhero import FedHERONet

        o, c = self.options, self.cfg
        n = self.data.data.num_nodes
        if n > o.max_nodes:
            raise ConfigError(
                f"FedHERO: client {self.partition_id} has {n} nodes, above fedhero.max-nodes="
                f"{o.max_nodes}; its latent graph costs O(N^2) time per step ({n}^2 similarities). "
                "Use more clients (a finer partition) or raise fedhero.max-nodes knowingly."
            )
        return lambda num_features, num_classes: FedHERONet(
            num_features,
            c.hidden,
            num_classes,
            c.num_layers,
            c.dropout,
            alpha=o.alpha,
            k=o.k,
            heads=o.heads,
            metric=o.metric,
            dual_channel=o.dual_channel,
            lam=o.lam,
            mu=o.mu,
            reg_norm=o.reg_norm,
            latent=o.latent,
            reg_surrogate=o.reg_surrogate,
            struct_act=o.struct_act,
        )

    def shared_prefixes(self) -> tuple[str, ...] | None:
        return shared_prefixes(self.options)

    def extra_loss(self, content: RecordDict) -> ExtraLoss:
        return lambda model: model.regularizer()

    def aggregation_weight(self) -> float:
        return float(self.learner.num_local)

    def probe_metrics(self) -> dict[str, float]:
        """The health of the latent graph the evaluation used (``latent.*``,
        :meth:`~fgl_flower.models.fedhero.LatentGraph.health`; homophily over pairs of
        training nodes), the structure learner's embeddings (``latent.dead_units``,
        ``latent.rank``) and the regulariser's value (``latent.reg``)."""
        g = self.data.data
        model = self.learner.model
        health = model.last_latent_graph().health(g.y, g.train_mask) | model.embedding_health()
        with torch.no_grad():
            health["reg"] = float(model.regularizer())
        return {f"latent.{k}": v for k, v in health.items()}
