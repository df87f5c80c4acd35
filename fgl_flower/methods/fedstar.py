"""FedStar's run checks (torch-free). Its options are the feature channel's layer on node
tasks (``fedstar.feature-conv``), and the platform's secure aggregation and central DP of the
shared channel (``fedstar.secure-aggregation``, ``fedstar.dp-*``); ``hidden``, ``num-layers``
and ``dropout`` size both channels."""

from __future__ import annotations

from fgl_flower.config import RunConfig
from fgl_flower.dp.options import DP_HELP, DP_OPTIONS
from fgl_flower.errors import ConfigError
from fgl_flower.methods.spec import MethodSpec
from fgl_flower.probes import Probe

#: The two channels' scale and the head's live units, measured on each client's evaluation
#: forwards every round (:class:`fgl_flower.models.fedstar.ChannelProbes`; FedDense's too).
#: FedStar's COLLAB client in Cross-Diff showed the dead head: node states growing until all
#: 64 hidden units of the head were negative for every test graph (results/feddense.md).
PROBES = (
    Probe("struct.norm", "mean L2 norm of the last structural map per node"),
    Probe(
        "feat.norm",
        "mean L2 norm of the feature channel's last map (last GIN layer's output) per node",
    ),
    Probe(
        "head.dead",
        "share of the head's hidden units that are <= 0 for every graph evaluated",
        dead_above=0.99,
        why="every unit of the head's hidden layer is negative for every graph: constant logits",
    ),
)


#: The feature channel's layer: FedStar's GIN, or (node tasks) ACM-GCN's, for a table that
#: runs every method on ACM-GCN (S2FGL's Table 1; ``models/fedstar.py`` ``FedStarNodeACM``).
FEATURE_CONVS = ("gin", "acm")
#: The registry's options of FedStar besides the platform's DP keys.
OPTIONS = {"feature-conv": "gin", "secure-aggregation": False}


def check_feature_channel(cfg: RunConfig) -> None:
    """FedStar's and FedDense's feature channel is a GIN: on graph tasks ``model`` must say
    so (no node backbone is named ``gin``; on node tasks ``model`` is not used)."""
    from fgl_flower.datasets.resolve import level_of

    if cfg.model != "gin" and level_of(cfg.dataset) == "graph":
        raise ConfigError(
            f"{cfg.method} builds its own dual-channel model whose feature channel "
            f"is a GIN; model={cfg.model!r} cannot be used: set model=gin."
        )


def check_config(cfg: RunConfig) -> None:
    from fgl_flower.datasets.resolve import level_of

    check_feature_channel(cfg)
    conv = cfg.option("feature-conv")
    if conv not in FEATURE_CONVS:
        raise ConfigError(f"fedstar.feature-conv={conv!r}: use one of {', '.join(FEATURE_CONVS)}.")
    if conv == "acm" and level_of(cfg.dataset) == "graph":
        raise ConfigError(
            "fedstar.feature-conv=acm is for node tasks (ACM-GCN is a node backbone); "
            "graph tasks keep FedStar's GIN: leave fedstar.feature-conv=gin."
        )


SPEC = MethodSpec(
    name="fedstar",
    strategy="fgl_flower.strategies.fedstar:FedStarStrategy",
    client="fgl_flower.clients.fedstar:FedStarClient",
    space={},
    tasks=("graph", "node", "graph-regression"),
    summary="Dual-channel GIN (features + structural encodings); only the structure "
    "encoder is shared.",
    reference="Tan et al., AAAI 2023",
    options={**OPTIONS, **DP_OPTIONS},
    check=check_config,
    own_init=True,
    probes=PROBES,
    defaults={"num-layers": 3, "lr": 0.001, "local-epochs": 1},
    robust_aggregation=True,
    option_help={
        "feature-conv": "the feature channel's layer: gin (FedStar's) | acm (ACM-GCN's; node tasks)",
        "secure-aggregation": "the structure encoders through SecAgg+ (as fedavg's)",
        **DP_HELP,
    },
)
