"""FGSSL (Huang et al., IJCAI 2023): the server is FedAvg; the semantic and structural
regularisers live in the client (:mod:`fgl_flower.clients.fgssl`)."""

from __future__ import annotations

from fgl_flower.methods.fgssl import FGSSLOptions
from fgl_flower.strategies.fedavg import FedAvgStrategy

#: Probes that a variant switches off by design (recorded, not watched).
IDLE = {
    "paper": (),
    "code": ("fgssl.structure-grad", "fgssl.teacher-effect"),
    "openfgl": ("fgssl.contrast-grad",),
}


class FGSSLStrategy(FedAvgStrategy):
    """FedAvg's aggregation; only what a variant trains is watched for a dead mechanism."""

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        self.opts = FGSSLOptions.from_config(cfg)

    def idle_probes(self, server_round: int) -> tuple[str, ...]:
        return IDLE[self.opts.variant]
