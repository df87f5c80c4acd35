"""FedGL's spec (torch-free): FedAvg plus global pseudo-labels fused from the clients'
predictions."""

from __future__ import annotations

from dataclasses import dataclass

from fgl_flower.config import MethodOptions, RunConfig
from fgl_flower.methods.spec import MethodSpec
from fgl_flower.probes import Probe

#: Client -> server: ``probs [n, C]`` (eval-mode softmax of every local node after training)
#: and ``nodes [n]`` (their global ids).
PREDICTIONS = "fedgl.predictions"
#: Server -> client: ``labels [n]`` (the global pseudo-label of each of the client's nodes,
#: in its node order; -1: none); absent before the first fusion.
PSEUDO = "fedgl.pseudo"

#: How the server weighs each client's predictions in the fusion: ``sampling-rate`` (its
#: aggregation weight, OpenFGL's default) or ``mean`` (equally).
PRED_WEIGHTS = ("sampling-rate", "mean")

PROBES = (
    Probe(
        "fedgl.pseudo-share",
        "share of the client's non-training nodes that carry a global pseudo-label (from round 2)",
        dead_below=1e-3,
        why="No node gets a pseudo-label: FedGL is FedAvg.",
    ),
    Probe(
        "fedgl.ssl-share",
        "w l_ssl / (l_ce + w l_ssl), the pseudo-label loss's share, mean over the round's steps",
        dead_below=1e-4,
        why="The pseudo-labels do not enter the local loss.",
    ),
    Probe(
        "fedgl.agreement",
        "share of the pseudo-labelled non-training nodes whose pseudo-label is the received "
        "global model's own prediction (1: the fusion adds nothing the global model lacks)",
    ),
)


@dataclass(frozen=True)
class FedGLOptions(MethodOptions):
    """FedGL's hyperparameters (Chen, Hu, Xu and Zheng, Information Sciences 2024; arXiv
    2105.03170): OpenFGL's defaults (the paper's text was not available offline)."""

    ssl_weight: float = 0.1
    threshold: float = 0.5
    pred_weight: str = "sampling-rate"


def check_config(cfg: RunConfig) -> None:
    o = FedGLOptions.from_config(cfg)
    o.require_choice("fedgl", "pred_weight", PRED_WEIGHTS)
    o.require_nonnegative("fedgl", "ssl_weight")
    if not 0 <= o.threshold < 1:
        from fgl_flower.errors import ConfigError

        raise ConfigError(f"fedgl.threshold={o.threshold} must be in [0, 1).")


SPEC = MethodSpec(
    name="fedgl",
    strategy="fgl_flower.strategies.fedgl:FedGLStrategy",
    client="fgl_flower.clients.fedgl:FedGLClient",
    space={"ssl-weight": "0.01..1:log", "threshold": "0.3..0.9"},
    tasks=("node",),
    summary="FedAvg plus global pseudo-labels: the server fuses the clients' confident "
    "predictions per global node and sends each client labels for its unlabelled nodes.",
    reference="Chen et al., Information Sciences 2024",
    options=FedGLOptions.defaults(),
    option_help={
        "ssl-weight": "weight of the pseudo-label cross-entropy",
        "threshold": "a client's class probability below this adds nothing to the fusion",
        "pred-weight": "sampling-rate (each client's aggregation weight) | mean",
    },
    check=check_config,
    probes=PROBES,
)
