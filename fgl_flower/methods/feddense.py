"""FedDense's run options (``feddense.*``) and their validation (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass

from fgl_flower.config import MethodOptions, RunConfig
from fgl_flower.dp.options import DP_HELP, DP_OPTIONS
from fgl_flower.errors import ConfigError
from fgl_flower.methods.fedstar import PROBES as FEDSTAR_PROBES
from fgl_flower.methods.fedstar import check_feature_channel
from fgl_flower.methods.spec import MethodSpec

#: Where the ReLU + Dropout of the feature channel sit (spec §3.1.2): after each GIN layer
#: (``post``, FedStar's placement, our reading of the paper's implementation details) or on
#: the dense concatenations (``pre``, Eqs. 6-8 read literally, the spec's reading).
ACTIVATIONS = ("pre", "post")

#: FedStar's probes (``struct.norm``, ``feat.norm``, ``head.dead``): the same structural
#: channel and head, measured the same way on ``DDCGNN``.
PROBES = FEDSTAR_PROBES


@dataclass(frozen=True)
class FedDenseOptions(MethodOptions):
    """FedDense hyperparameters (spec §3.1, §8); ``num-layers`` and ``dropout`` are the run's."""

    width: int = 16  # r: output width of every GNN layer (the paper: 10, 16, 32)
    d0: int = 64  # width of both initialisation layers; 0 = width (fully narrow, spec §3.1.4)
    head: int = 64  # readout projection and head width
    activation: str = (
        "post"  # post (after each GIN layer, as FedStar) | pre (Eqs. 6-8 read literally)
    )
    secure_aggregation: bool = False  # the structural channels through SecAgg+ (fgl_flower.secagg)

    @property
    def init_width(self) -> int:
        return self.d0 or self.width


def check_config(cfg: RunConfig) -> None:
    """Reject settings FedDense cannot run before anything starts."""
    check_feature_channel(cfg)
    o = FedDenseOptions.from_config(cfg)
    o.require_at_least_one("feddense", "width", "head")
    if o.d0 < 0:
        raise ConfigError(f"feddense.d0 must be positive, or 0 for d0 = width (got {o.d0}).")
    if o.activation not in ACTIVATIONS:
        raise ConfigError(
            f"feddense.activation={o.activation!r}: use one of {', '.join(ACTIVATIONS)} "
            "(ReLU+Dropout on the dense concatenations, or after each layer)."
        )


SPEC = MethodSpec(
    name="feddense",
    strategy="fgl_flower.strategies.feddense:FedDenseStrategy",
    client="fgl_flower.clients.feddense:FedDenseClient",
    space={
        "width": "8,16,32",
    },
    tasks=("graph",),
    summary="Dual-densely connected GNN: feature layers read every earlier map of both "
    "channels; only the narrow structural channel is shared.",
    reference="Wang et al., arXiv:2408.11662 (2024)",
    options={**FedDenseOptions.defaults(), **DP_OPTIONS},  # DP of the structural channels
    check=check_config,
    own_init=True,
    probes=PROBES,
    defaults={"dataset": "synthetic-graphs", "partition": "random", "model": "gin"},
    robust_aggregation=True,
    config_note='graph tasks; needs model = "gin" (the feature channel)',
    option_help={
        "width": "r: output width of every GNN layer of both channels (paper: 10, 16, 32)",
        "d0": "width of both initialisation layers; 0: d0 = width (fully narrow)",
        "head": "readout projection and head width",
        "activation": "post (ReLU+Dropout once after each GIN layer, as FedStar) | pre (on the dense concatenations, Eqs. 6-8 read literally)",
        "secure-aggregation": "the structural channels through SecAgg+ (as fedavg's)",
        **DP_HELP,
    },
)
