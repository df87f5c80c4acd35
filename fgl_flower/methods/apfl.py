"""APFL's run options (``apfl.*``), checks and probes (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass

from fgl_flower.config import MethodOptions, RunConfig
from fgl_flower.errors import ConfigError
from fgl_flower.methods.spec import MethodSpec
from fgl_flower.probes import Probe

#: ``paper``: Algorithm 1 as printed (the personalized model mixes the *parameters*,
#: v̄ = αv + (1−α)w; α steps every local step on its exact gradient); ``official``: the
#: authors' FedTorch code (it mixes the *outputs*, αv(x) + (1−α)w(x); α steps once per round
#: on a parameter-space surrogate with a 0.02·α term, at the local learning rate).
VARIANTS = ("paper", "official")
#: Which personalized model a round reports: ``trained``, αv + (1−α)w with the client's own
#: trained w at the end of its round, in its train reply (what FedTorch logs); ``received``,
#: the same v and α with the averaged w the server sends next (Algorithm 1's synchronised
#: copy; round r's evaluation rides in round r + 1's train message, the last one in an
#: evaluate message).
EVALUATES = ("trained", "received")

PROBES = (
    Probe(
        "alpha",
        "the client's mixing weight α after its round (0: the global model, 1: the local one)",
    ),
    Probe(
        "alpha.moved",
        "|α after − α before| over the client's round",
        dead_below=1e-9,
        why="the mixing weight no longer adapts (zero gradient, or pinned at 0 or 1)",
    ),
)


@dataclass(frozen=True)
class APFLOptions(MethodOptions):
    """APFL hyperparameters (Deng, Kamani and Mahdavi, 2020)."""

    variant: str = "paper"
    alpha: float = 0.5  # α at the start (FedTorch's parameters.py; its run_mpi.py passes 0)
    adaptive: bool = True  # learn α (the paper's adaptive APFL); false keeps it fixed
    alpha_lr: float = -1.0  # step size of α; -1: the run's lr (the paper uses one step size)
    evaluate: str = "trained"  # trained (own w, end of round) | received (the averaged w sent next)


def check_config(cfg: RunConfig) -> None:
    o = APFLOptions.from_config(cfg)
    o.require_choice("apfl", "variant", VARIANTS)
    o.require_choice("apfl", "evaluate", EVALUATES)
    if not 0.0 <= o.alpha <= 1.0:
        raise ConfigError(
            f"apfl.alpha={o.alpha} must lie in [0, 1] (the weight of the local model)."
        )
    if o.alpha_lr != -1.0 and not o.alpha_lr > 0:
        raise ConfigError(
            f"apfl.alpha-lr={o.alpha_lr}: use a positive step size, or -1 for the run's lr."
        )


SPEC = MethodSpec(
    name="apfl",
    strategy="fgl_flower.strategies.apfl:APFLStrategy",
    client="fgl_flower.clients.apfl:APFLClient",
    space={
        "alpha": "0.05..0.95",
    },
    tasks=("node", "link"),
    summary="Personalized: each client mixes a local model with its copy of the global one, "
    "alpha v + (1 - alpha) w, and learns alpha.",
    reference="Deng, Kamani and Mahdavi, arXiv 2003.13461 (2020)",
    options=APFLOptions.defaults(),
    check=check_config,
    probes=PROBES,
    robust_aggregation=True,
    config_note="node tasks and link prediction",
    option_help={
        "variant": "paper (Algorithm 1: mixed parameters, alpha every step) | official (FedTorch: mixed outputs, alpha once a round)",
        "alpha": "the local model's weight at the start",
        "adaptive": "learn alpha (adaptive APFL); false keeps it fixed",
        "alpha-lr": "step size of alpha; -1: the run's lr",
        "evaluate": "trained (own w at the end of the round, FedTorch's log) | received (the averaged w sent next)",
    },
)
