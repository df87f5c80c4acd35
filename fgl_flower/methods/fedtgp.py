"""FedTGP's spec (torch-free): FedProto's clients, global prototypes trained on the server."""

from __future__ import annotations

from dataclasses import dataclass

from fgl_flower.config import MethodOptions, RunConfig
from fgl_flower.methods.fedproto import GLOBAL, LOSSES, PROTOTYPES, require_prototype_backbone
from fgl_flower.methods.spec import MethodSpec
from fgl_flower.probes import Probe

__all__ = ["GLOBAL", "PROTOTYPES", "FedTGPOptions", "SPEC"]

PROBES = (
    Probe(
        "fedtgp.loss-share",
        "lambda l_proto / (l_ce + lambda l_proto), mean over the round's steps (from round 2)",
        dead_below=1e-3,
        why="The prototype regulariser adds nothing: the clients train alone (Local).",
    ),
    Probe(
        "fedtgp.margin",
        "after training, mean over training nodes of (distance to the nearest other class's "
        "global prototype - distance to their own class's), over the mean distance between "
        "global prototypes",
    ),
    Probe(
        "fedtgp.spread",
        "mean distance between the trained global prototypes of different classes over their "
        "mean norm (server)",
        dead_below=1e-3,
        why="The trained global prototypes have collapsed onto one point.",
    ),
    Probe(
        "fedtgp.adaptive-margin",
        "the round's margin delta = min(max over classes of the distance to the nearest other "
        "class's mean uploaded prototype, margin-threshold) (server)",
    ),
    Probe(
        "fedtgp.server-loss",
        "the server's contrastive loss of the uploaded prototypes against the trained ones, "
        "last batch of the round's training",
    ),
)


@dataclass(frozen=True)
class FedTGPOptions(MethodOptions):
    """FedTGP's hyperparameters (Zhang, Liu, Hua and Cao, AAAI 2024), the official code's
    defaults (``TsingZ0/HtFLlib``: ``lamda`` 1, ``server_epochs`` 100, ``margin_threthold``
    100, the server's batch of 10 prototypes, SGD at the local rate 0.01)."""

    weight: float = 1.0
    loss: str = "sample"
    server_epochs: int = 100
    server_batch: int = 10
    server_lr: float = 0.01
    margin_threshold: float = 100.0


def check_config(cfg: RunConfig) -> None:
    o = FedTGPOptions.from_config(cfg)
    o.require_choice("fedtgp", "loss", LOSSES)
    o.require_nonnegative("fedtgp", "weight", "margin_threshold", "server_batch")
    o.require_positive("fedtgp", "server_lr")
    o.require_at_least_one("fedtgp", "server_epochs")
    require_prototype_backbone(cfg, "fedtgp")


SPEC = MethodSpec(
    name="fedtgp",
    strategy="fgl_flower.strategies.fedtgp:FedTGPStrategy",
    client="fgl_flower.clients.fedtgp:FedTGPClient",
    space={"weight": "0.01..10:log", "margin-threshold": "0.1..100:log"},
    tasks=("node",),
    summary="FedProto with trainable global prototypes: the server fits one per class to the "
    "uploaded ones by a contrastive loss with an adaptive margin.",
    reference="Zhang et al., AAAI 2024",
    options=FedTGPOptions.defaults(),
    option_help={
        "weight": "lambda: weight of the prototype regulariser",
        "loss": "sample (each node against its class's prototype) | class (per-class errors summed)",
        "server-epochs": "epochs of the server's prototype training each round",
        "server-batch": "uploaded prototypes per server step (0: all at once)",
        "server-lr": "the server's SGD learning rate (a fresh optimizer each round)",
        "margin-threshold": "tau: the adaptive margin's cap (0: no margin)",
    },
    check=check_config,
    probes=PROBES,
)
