"""FedGTA's run options (``fedgta.*``), probes and validation (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass

from fgl_flower.config import MethodOptions, RunConfig
from fgl_flower.errors import ConfigError
from fgl_flower.methods.spec import MethodSpec
from fgl_flower.probes import Probe

#: The moments of the propagated soft labels a client reports: raw (``E[p^k]``), central
#: (``E[(p - E p)^k]``) or both stacked (``hybrid``, the authors' choice for Cora and CiteSeer).
MOMENT_TYPES = ("raw", "central", "hybrid")
#: Reply record with a client's moment vector (``moments``) and smoothing confidence
#: (``confidence``).
STATISTICS = "fedgta.statistics"

#: Measured by the server on each round's aggregation sets, and by the clients on their
#: propagated soft labels.
PROBES = (
    Probe(
        "fedgta.accepted",
        "share of the other trained clients whose moments pass "
        "fedgta.accept in a client's aggregation, mean over the clients",
        dead_below=1e-6,
        dead_above=1 - 1e-6,
        why="Every client averages only itself (FedGTA is local training) or every client "
        "averages all (one confidence-weighted FedAvg): the topology-aware selection "
        "chooses nothing.",
    ),
    Probe(
        "fedgta.similarity-spread",
        "largest minus smallest cosine similarity of two clients' moment vectors",
    ),
    Probe(
        "fedgta.confidence",
        "smoothing confidence as a share of its maximum, sum_v d_v (C/e - H(p_v)) / sum_v d_v C/e",
    ),
)


@dataclass(frozen=True)
class FedGTAOptions(MethodOptions):
    """FedGTA's hyperparameters (the authors' code: ``config.py`` and the values its
    comments give for Cora; label propagation ``alpha`` and temperature as its ``NonParaLP``)."""

    lp_steps: int = 5  # k: steps of the non-parametric label propagation
    lp_alpha: float = 0.5  # weight of the propagated labels against the initial ones
    temperature: float = 20.0  # softens the propagated labels of the smoothing confidence
    num_moments: int = 6  # K: orders 1..K of each moment (Cora 6, CiteSeer 20, PubMed 13)
    moment_type: str = "hybrid"  # raw | central | hybrid (Cora, CiteSeer; PubMed: raw)
    accept: float = 0.5  # a client averages the clients whose moments' cosine exceeds this


def check_config(cfg: RunConfig) -> None:
    o = FedGTAOptions.from_config(cfg)
    o.require_at_least_one("fedgta", "lp_steps", "num_moments")
    o.require_choice("fedgta", "moment_type", MOMENT_TYPES)
    if not 0.0 <= o.lp_alpha <= 1.0:
        raise ConfigError(f"fedgta.lp-alpha={o.lp_alpha} must be in [0, 1].")
    o.require_positive("fedgta", "temperature")
    if not -1.0 <= o.accept < 1.0:
        raise ConfigError(
            f"fedgta.accept={o.accept} must be in [-1, 1): a cosine similarity "
            f"(a client always averages its own model)."
        )


SPEC = MethodSpec(
    name="fedgta",
    strategy="fgl_flower.strategies.fedgta:FedGTAStrategy",
    client="fgl_flower.clients.fedgta:FedGTAClient",
    space={
        "lp-alpha": "0.1..0.9",
        "accept": "0.3..0.9",
    },
    tasks=("node",),
    summary="Personalised averages over the clients whose label-propagated predictions have "
    "similar moments, weighted by their topology-aware smoothing confidence; any node backbone.",
    reference="Li et al., FedGTA, VLDB 2024",
    options=FedGTAOptions.defaults(),
    check=check_config,
    probes=PROBES,
    defaults={"num-rounds": 100},
    config_note="node tasks; any node backbone (the authors' code: GAMLP); 100 rounds of 3 epochs",
    option_help={
        "lp-steps": "k: steps of the label propagation of the predictions",
        "lp-alpha": "weight of the propagated labels against the initial ones",
        "temperature": "softens the propagated labels of the smoothing confidence",
        "num-moments": "K: moment orders 1..K (the code's Cora value; CiteSeer 20, PubMed 13)",
        "moment-type": "raw | central | hybrid (both; Cora, CiteSeer)",
        "accept": "a client averages the clients whose moments' cosine similarity exceeds this",
    },
    # the no-option demo (no dataset named): 10 of the protocol's 100 rounds
    demo={"num-rounds": 10},
)
