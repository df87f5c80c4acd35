r"""FedDEP server (Zhang et al., SDM 2024): generator rounds, then FedAvg of the classifier.

The exchange is FedSage+'s (:class:`~fgl_flower.strategies.fedsageplus.FedSagePlusStrategy`)
on other payloads. Rounds ``1..G`` (``feddep.gen-rounds``) train every client's embedding
generator (:mod:`fgl_flower.clients.feddep`), three exchanges each, all metered:

1. ``query.generate``: each client replies the neighbour embeddings its generator makes for
   every node of its impaired graph, ``[N'_i, K, H]``, with the predicted counts ``[N'_i]``;
2. ``query.cross_grad`` to each client ``j``: the other clients' embeddings; ``j`` returns, for
   each, the gradient of the reconstruction loss against *prototype* targets drawn from its own
   subgraph;
3. ``train`` to each client ``i``: :math:`\sum_{j\neq i}` of those gradients; it steps its
   generator on its own loss and theirs. No model is averaged, none is evaluated.

From round ``G + 1`` each client trains the classifier on its features and mended embeddings,
and the server is FedAvg's.
"""

from __future__ import annotations

from fgl_flower.methods.feddep import (
    CLASSIFIER_PROBES,
    CROSS,
    GENERATED,
    GENERATOR_PROBES,
    GRADIENTS,
    ROUND_CLIENTS,
    FedDEPOptions,
)
from fgl_flower.strategies.fedsageplus import FedSagePlusStrategy


class FedDEPStrategy(FedSagePlusStrategy):
    """FedSage+'s generator rounds on FedDEP's records, then FedAvg."""

    OPTIONS = FedDEPOptions
    GENERATED, CROSS, GRADIENTS, ROUND_CLIENTS = GENERATED, CROSS, GRADIENTS, ROUND_CLIENTS
    GENERATOR_PROBES, CLASSIFIER_PROBES = GENERATOR_PROBES, CLASSIFIER_PROBES

    def idle_probes(self, server_round: int) -> tuple[str, ...]:
        """Without the cross term the cross-gradient probe is idle, the prototype gap is not
        (the prototypes are still the targets)."""
        if self.generator_round(server_round):
            return CLASSIFIER_PROBES + (() if self.opts.cross else ("feddep.cross-grad",))
        return GENERATOR_PROBES
