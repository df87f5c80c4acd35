"""FedStar client (Tan et al., AAAI 2023): a personalized dual-channel GIN of which only
the structure encoder (``struct.*``) is federated.

Each round: load the global ``struct.*`` weights, train every parameter for
``local-epochs`` with the client's persistent Adam (its moments of the shared weights
included, spec §5), upload ``struct.*``. The feature channel and the head never leave the
client.
On node tasks (FedHERO's baseline) the model is ``FedStarNodeGIN``: the same channels on
the client's graph with a per-node head.
"""

from __future__ import annotations

from fgl_flower.clients.fedavg import FedAvgClient
from fgl_flower.clients.learner import ModelBuilder
from fgl_flower.datasets import NodeClientData


class FedStarClient(FedAvgClient):
    def model_builder(self) -> ModelBuilder:
        from fgl_flower.models.fedstar import FedStarGIN, FedStarNodeGIN

        c = self.cfg
        cls = FedStarNodeGIN if isinstance(self.data, NodeClientData) else FedStarGIN
        return lambda num_features, num_classes: cls(
            num_features, c.hidden, num_classes, c.num_layers, c.dropout)

    def shared_prefixes(self) -> tuple[str, ...]:
        return ("struct.",)
