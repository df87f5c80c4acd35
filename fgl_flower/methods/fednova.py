"""FedNova's probe and record key (torch-free): it has no options of its own."""

from __future__ import annotations

from fgl_flower.methods.spec import MethodSpec
from fgl_flower.probes import Probe

#: Reply metric: the local optimizer steps :math:`a_k` the client took this round.
STEPS = "fednova.steps"

PROBES = (
    Probe(
        "steps.spread",
        "max / min of the round's clients' local steps a_k (server): 1 when every "
        "client took as many steps, and FedNova's mean is FedAvg's",
        dead_below=1.001,
        why="every client took the same number of local steps, so the normalized average is "
        "FedAvg's (full-batch node tasks always do)",
    ),
)


SPEC = MethodSpec(
    name="fednova",
    strategy="fgl_flower.strategies.fednova:FedNovaStrategy",
    client="fgl_flower.clients.fednova:FedNovaClient",
    space={},
    tasks=("node", "graph", "link", "graph-regression"),
    summary="FedAvg with the normalized average: each update divided by the client's local "
    "steps, the sum scaled by their weighted mean.",
    reference="Wang et al., NeurIPS 2020",
    probes=PROBES,
)
