"""FedFA's run options (``fedfa.*``), checks and probes (torch-free).

FedFA here is the method S2FGL's Table 1 cites, Zhou & Konukoglu's *Federated Feature
Augmentation* (ICLR 2023); see ``docs/methods/fedfa.md`` for the other "FedFa" in S2FGL's
code base.
"""

from __future__ import annotations

from dataclasses import dataclass

from fgl_flower.config import MethodOptions, RunConfig
from fgl_flower.errors import ConfigError
from fgl_flower.methods.spec import MethodSpec
from fgl_flower.probes import Probe

#: How the server turns the clients' running statistics into the client-sharing variance:
#: ``channel`` (the paper: the variance over clients of each channel's statistic) or
#: ``scalar`` (the official code: one variance over every client and channel at once, so
#: every channel gets the same value and the fusion weights are all 1).
SHARING = ("channel", "scalar")
#: The client's running statistic means at the start of its round: ``reset`` to 0 and 1 (the
#: paper's Algorithm 1, line 5) or ``carried`` on from the server's average of them (the
#: official code, which averages and broadcasts every buffer).
STATISTICS = ("reset", "carried")

PROBES = (
    Probe(
        "ffa.applied",
        "training forwards the FFA layer augmented this round (each with chance ffa.prob)",
    ),
    Probe(
        "ffa.shift",
        "||X_hat - X|| / ||X|| at the FFA layer, mean over the round's augmented forwards "
        "(absent when none was)",
        dead_below=1e-3,
        why="the sampled statistics equal the original ones: the augmentation adds nothing",
    ),
    Probe(
        "ffa.gamma-std",
        "std over channels of the fusion weight gamma_mu (client-sharing statistics)",
        dead_below=1e-6,
        why="every channel gets the same fusion weight: the federation's statistics "
        "do not shape the augmentation (scalar sharing, or one client so far)",
    ),
    Probe(
        "ffa.gamma-std-sigma",
        "std over channels of the fusion weight gamma_sigma (under statistics = reset "
        "mostly the spread of the clients' counts of augmented forwards, docs/methods/fedfa.md)",
    ),
    Probe(
        "sharing-var",
        "mean over channels of the client-sharing variance of the statistic means (server)",
    ),
)


@dataclass(frozen=True)
class FedFAOptions(MethodOptions):
    """FedFA hyperparameters (defaults: the official code's ``FFALayer``)."""

    prob: float = 0.5  # chance that a training forward is augmented
    momentum: float = 0.99  # of the client's running statistic means
    eps: float = 1e-6
    sharing: str = "channel"
    statistics: str = "reset"


def check_config(cfg: RunConfig) -> None:
    """Reject settings FedFA cannot run before anything starts."""
    from fgl_flower.models.registry import require_embeds

    o = FedFAOptions.from_config(cfg)
    require_embeds(cfg.model, "fedfa", "augments the representations a linear classifier reads")
    o.require_choice("fedfa", "sharing", SHARING)
    o.require_choice("fedfa", "statistics", STATISTICS)
    if not 0.0 <= o.prob <= 1.0 or not 0.0 <= o.momentum < 1.0:
        raise ConfigError(
            f"fedfa.prob must lie in [0, 1] and fedfa.momentum in [0, 1) "
            f"(got {o.prob}, {o.momentum})."
        )
    o.require_positive("fedfa", "eps")


SPEC = MethodSpec(
    name="fedfa",
    strategy="fgl_flower.strategies.fedfa:FedFAStrategy",
    client="fgl_flower.clients.fedfa:FedFAClient",
    space={
        "prob": "0.1..0.9",
        "momentum": "0.9..0.999",
    },
    tasks=("node",),
    summary="FedAvg with federated feature augmentation: the statistics of the classifier's "
    "input are perturbed with a variance fused from the batch and from all clients' statistics.",
    reference="Zhou and Konukoglu, FedFA, ICLR 2023",
    options=FedFAOptions.defaults(),
    check=check_config,
    probes=PROBES,
    defaults={"model": "acmgcn"},
    config_note="node tasks; needs a backbone with embed() + classifier (acmgcn)",
    option_help={
        "prob": "chance that a training forward is augmented",
        "momentum": "of the client's running statistic means (uploaded)",
        "eps": "added to variances (the official layer's)",
        "sharing": "channel (the paper: per-channel variance over clients) | scalar (the official code: one variance over clients and channels)",
        "statistics": "the client's running statistic means at its round's start: reset to 0 and 1 (the paper) | carried (the official code: the server's average)",
    },
)
