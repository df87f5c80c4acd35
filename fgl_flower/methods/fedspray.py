"""FedSpray's run options (``fedspray.*``) and their validation.

Torch-free, like every module of :mod:`fgl_flower.methods`: a bad option is reported
before anything heavy is imported.
"""

from __future__ import annotations

from dataclasses import dataclass

from fgl_flower.config import RunConfig
from fgl_flower.dp.options import DP_HELP, DP_OPTIONS
from fgl_flower.errors import ConfigError
from fgl_flower.methods.spec import MethodSpec
from fgl_flower.probes import Probe

#: Record with the structure proxies: ``S`` (``[C, d_s]``) both ways, ``class-ratio``
#: (``[C]``, :math:`\mathbf a^{(k)}`) up.
PROXIES = "proxies"
#: With client-level DP: the key of the class proxies ``S`` in the ``arrays`` record.
DP_PROXIES = "proxies.S"

VARIANTS = {"official": 1.0, "paper": 5.0}  # variant -> its lambda1

#: The structure proxies at work, measured by each client in every round's training
#: (:func:`fgl_flower.clients.fedspray.spray_probes`).
PROBES = (
    # no dead bound: 0 in the official variant's first rounds (every unlabeled node receives the
    # global proxies, but none is confident enough to be distilled yet); 0 to the end means the
    # teacher stayed a plain MLP
    Probe(
        "proxy.shift",
        "mean total variation between the soft targets with and without the "
        "global structure proxies, over the distilled nodes that use them",
    ),
    Probe(
        "proxy.alignment",
        "mean cosine between the client's class proxies and the global ones "
        "it received, over its training classes, both relative to the global class mean",
        dead_below=0.1,
        why="The client's class proxies are zero or unrelated to the aligned global ones: the "
        "proxies carry no shared class-wise structure.",
    ),
    Probe(
        "proxy.norm",
        "mean norm of the global class proxies the client received",
        dead_below=1e-6,
        why="The global structure proxies are zero.",
    ),
    Probe(
        "kd.agreement",
        "share of the distilled nodes where the soft target's and the trained "
        "GNN's predictions agree",
    ),
    Probe(
        "kd.unlabeled",
        "share of the client's unlabeled nodes that are in the distillation set (paper variant: 1)",
    ),
)


@dataclass(frozen=True)
class FedSprayOptions:
    """The ``fedspray.*`` run-config options, validated and resolved."""

    variant: str
    lambda1: float
    lambda2: float
    proxy_dim: int
    proxy_lr: float
    confidence: float
    zero_proxies: bool

    @classmethod
    def from_config(cls, cfg: RunConfig) -> FedSprayOptions:
        variant = str(cfg.option("variant")).lower()
        if variant not in VARIANTS:
            raise ConfigError(
                f"fedspray.variant={variant!r}: use 'official' (the released code) or 'paper' "
                "(Algorithm 1 as printed)."
            )
        lambda1 = float(cfg.option("lambda1"))
        opts = cls(
            variant=variant,
            lambda1=VARIANTS[variant] if lambda1 < 0 else lambda1,
            lambda2=float(cfg.option("lambda2")),
            proxy_dim=int(cfg.option("proxy-dim")),
            proxy_lr=float(cfg.option("proxy-lr")),
            confidence=float(cfg.option("confidence")),
            zero_proxies=bool(cfg.option("zero-proxies")),
        )
        if opts.proxy_dim < 1 or opts.proxy_lr <= 0 or opts.lambda2 < 0:
            raise ConfigError("fedspray: proxy-dim must be >= 1, proxy-lr > 0 and lambda2 >= 0.")
        if not 0.0 <= opts.confidence <= 1.0:
            raise ConfigError(f"fedspray.confidence={opts.confidence} must be in [0, 1].")
        return opts


def check_config(cfg: RunConfig) -> None:
    """Fail before training on bad ``fedspray.*`` options."""
    FedSprayOptions.from_config(cfg)


SPEC = MethodSpec(
    name="fedspray",
    strategy="fgl_flower.strategies.fedspray:FedSprayStrategy",
    client="fgl_flower.clients.fedspray:FedSprayClient",
    space={
        "lambda2": "0.1..10:log",
        "proxy-lr": "0.001..0.1:log",
        "confidence": "0.5..0.9",
    },
    tasks=("node",),
    summary="Personalized GNNs distilled from a global feature-structure encoder with "
    "class-wise structure proxies.",
    reference="Fu et al., KDD 2024",
    options={
        "variant": "official",
        "lambda1": -1.0,
        "lambda2": 1.0,
        "proxy-dim": 64,
        "proxy-lr": 0.02,
        "confidence": 0.7,
        "zero-proxies": False,
        **DP_OPTIONS,
    },
    check=check_config,
    probes=PROBES,
    option_help={
        "variant": "official (the released code) | paper (Algorithm 1 as printed)",
        "lambda1": "KD weight of the GNN loss; -1: the variant's (official 1, paper 5)",
        "lambda2": "KD weight of the encoder loss",
        "proxy-dim": "d_s, width of embeddings and structure proxies",
        "proxy-lr": "Adam lr of the structure proxies",
        "confidence": "official: unlabeled nodes with max q above this join the KD set",
        "zero-proxies": "the S = 0 ablation (Table 3)",
        **DP_HELP,
    },
)
