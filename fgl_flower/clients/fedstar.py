"""FedStar client (Tan et al., AAAI 2023): a personalized dual-channel GIN of which only
the structure encoder (``struct.*``) is federated.

Each round: load the global ``struct.*`` weights, train every parameter for
``local-epochs`` with the client's persistent Adam (its moments of the shared weights
included, spec §5), upload ``struct.*``. The feature channel and the head never leave the
client.
On node tasks (FedHERO's baseline) the model is ``FedStarNodeGIN``: the same channels on
the client's graph with a per-node head (``FedStarNodeACM`` with ``fedstar.feature-conv =
"acm"``: ACM-GCN layers in the feature channel).

Probes (``methods/fedstar.py`` ``PROBES``, :class:`~fgl_flower.models.fedstar.ChannelProbes`):
measured on the evaluation's own forwards (no extra pass), i.e. over the validation and test
graphs on graph tasks, over all nodes of the client's graph on node tasks (``head.dead``
then counts units off for every node). Under ``eval-dropout`` the evaluation runs in train
mode, so one eval-mode pass of :meth:`Learner.evaluate` measures them instead.
"""

from __future__ import annotations

from fgl_flower.clients.fedavg import FedAvgClient
from fgl_flower.clients.learner import Learner, ModelBuilder
from fgl_flower.datasets import NodeClientData


class FedStarClient(FedAvgClient):
    def model_builder(self) -> ModelBuilder:
        from fgl_flower.models.fedstar import FedStarGIN, FedStarNodeACM, FedStarNodeGIN

        c = self.cfg
        node = FedStarNodeACM if c.option("feature-conv") == "acm" else FedStarNodeGIN
        cls = node if isinstance(self.data, NodeClientData) else FedStarGIN
        return lambda num_features, num_classes: cls(
            num_features, c.hidden, num_classes, c.num_layers, c.dropout
        )

    def shared_prefixes(self) -> tuple[str, ...]:
        return ("struct.",)

    def evaluate_learner(self, learner: Learner, server_round: int) -> dict[str, float]:
        from fgl_flower.models.fedstar import ChannelProbes

        with ChannelProbes(learner.model) as self._probes:  # measures eval-mode forwards only
            return super().evaluate_learner(learner, server_round)

    def probe_metrics(self) -> dict[str, float]:
        """``struct.norm``, ``feat.norm`` and ``head.dead`` of the evaluation just made."""
        probes = getattr(self, "_probes", None)
        if self.eval_dropout():  # the evaluation ran in train mode: one eval-mode pass
            from fgl_flower.models.fedstar import ChannelProbes

            with ChannelProbes(self.learner.model) as probes:
                self.learner.evaluate()
        return probes.values() if probes is not None else {}
