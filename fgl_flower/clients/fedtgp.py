"""FedTGP client (Zhang et al., AAAI 2024): FedProto's (:mod:`fgl_flower.clients.fedproto`),
against the server's trained global prototypes; the official code's client is FedProto's."""

from __future__ import annotations

from fgl_flower.clients.fedproto import FedProtoClient
from fgl_flower.methods.fedtgp import FedTGPOptions


class FedTGPClient(FedProtoClient):
    options = FedTGPOptions
    probe_prefix = "fedtgp"
