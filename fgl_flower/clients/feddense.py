"""FedDense client (Wang et al., 2024): FedStar's protocol on the dual-densely connected
GNN (:class:`~fgl_flower.models.feddense.DDCGNN`); only ``struct.*`` is uploaded (Eq. 9)."""

from __future__ import annotations

from fgl_flower.clients.fedstar import FedStarClient
from fgl_flower.clients.learner import ModelBuilder
from fgl_flower.methods.feddense import FedDenseOptions


class FedDenseClient(FedStarClient):
    def model_builder(self) -> ModelBuilder:
        from fgl_flower.models.feddense import DDCGNN

        c, o = self.cfg, FedDenseOptions.from_config(self.cfg)
        return lambda num_features, num_classes: DDCGNN(
            num_features,
            num_classes,
            width=o.width,
            d0=o.init_width,
            head=o.head,
            num_layers=c.num_layers,
            dropout=c.dropout,
            activation=o.activation,
        )
