"""AdaFGL's spec (torch-free): FedAvg for ``fed-rounds`` rounds builds the federated knowledge
extractor, then every client trains its own propagation modules on it, uploading nothing."""

from __future__ import annotations

from dataclasses import dataclass

from fgl_flower.config import MethodOptions, RunConfig
from fgl_flower.errors import ConfigError
from fgl_flower.methods.spec import MethodSpec
from fgl_flower.probes import Probe

#: How the two modules make the prediction: ``mix`` trains both and weighs their class
#: probabilities by the HCS (the paper's adaptive fusion as OpenFGL implements it);
#: ``switch`` builds only the homophilous module where the HCS reaches ``hcs-threshold``,
#: else only the heterophilous one (the official code).
FUSIONS = ("mix", "switch")

PROBES = (
    Probe(
        "adafgl.added-edges",
        "step 2: pairs the extractor's knowledge links (similarity above adafgl.threshold) per "
        "edge of the local graph",
        dead_below=1e-6,
        why="The extractor links no pair: the knowledge-guided topology is the local graph.",
    ),
    Probe(
        "adafgl.kd-share",
        "step 2: MSE(H, P) / (CE + MSE(H, P)) of the homophilous module, the extractor's "
        "knowledge share of its loss, mean over the round's steps",
        dead_below=1e-4,
        why="The extractor's probabilities do not enter the homophilous module's loss.",
    ),
    Probe(
        "adafgl.hcs",
        "step 2: the Homophily Confidence Score (label propagation's accuracy on half the "
        "training nodes from the other half)",
    ),
    Probe(
        "adafgl.homo-weight",
        "step 2: the homophilous module's weight in the prediction (the HCS under mix; 1 or "
        "0 under switch)",
    ),
    Probe(
        "adafgl.gain",
        "step 2: the personalized prediction's validation accuracy minus the extractor's, on "
        "the client's validation nodes",
    ),
)


@dataclass(frozen=True)
class AdaFGLOptions(MethodOptions):
    """AdaFGL's hyperparameters (Li et al., ICDE 2024; arXiv 2401.11750). Numbers are the
    official code's (xkLi-Allen/AdaFGL); the step-2 schedule is OpenFGL's (its rounds after
    ``fed-rounds``, ``epochs`` steps each); the paper's text was not available offline
    (docs/methods/adafgl.md)."""

    fed_rounds: int = 50
    epochs: int = 1
    fusion: str = "mix"
    hcs_threshold: float = 0.9
    alpha: float = 0.05
    beta: float = 0.2
    threshold: float = 0.999
    steps: int = 3
    r: float = 0.5
    lp_steps: int = 10
    lp_alpha: float = 0.5
    lr: float = 0.01
    weight_decay: float = 5e-4


def check_config(cfg: RunConfig) -> None:
    o = AdaFGLOptions.from_config(cfg)
    o.require_choice("adafgl", "fusion", FUSIONS)
    o.require_positive("adafgl", "epochs", "fed_rounds", "lr")
    o.require_nonnegative("adafgl", "steps", "lp_steps", "weight_decay")
    if o.fed_rounds >= cfg.num_rounds:
        raise ConfigError(
            f"adafgl.fed-rounds={o.fed_rounds} leaves no personalized round in num-rounds="
            f"{cfg.num_rounds}: the rounds count both steps; raise num-rounds above "
            f"{o.fed_rounds} or lower adafgl.fed-rounds."
        )
    for name in ("alpha", "beta", "lp_alpha", "r"):
        if not 0 <= getattr(o, name) <= 1:
            raise ConfigError(
                f"adafgl.{name.replace('_', '-')}={getattr(o, name)} must be in [0, 1]."
            )


SPEC = MethodSpec(
    name="adafgl",
    strategy="fgl_flower.strategies.adafgl:AdaFGLStrategy",
    client="fgl_flower.clients.adafgl:AdaFGLClient",
    space={"alpha": "0.0..1.0", "beta": "0.0..1.0"},
    tasks=("node",),
    summary="Two steps: FedAvg trains a federated knowledge extractor, then each client trains "
    "homophilous and heterophilous propagation modules on a topology its predictions refine, "
    "fused by a label-propagation homophily score; step 2 uploads nothing.",
    reference="Li et al., AdaFGL, ICDE 2024",
    options=AdaFGLOptions.defaults(),
    option_help={
        "fed-rounds": "step 1's FedAvg rounds; the later rounds are step 2's",
        "epochs": "step 2's optimizer steps per round",
        "fusion": "mix (both modules, weighed by the HCS) | switch (one, by hcs-threshold)",
        "hcs-threshold": "switch: the homophilous module where the HCS reaches it",
        "alpha": "weight of the local graph in the knowledge-guided topology",
        "beta": "weight of the knowledge edges in the heterophilous propagation",
        "threshold": "similarity of two nodes' predictions above which the extractor links them",
        "steps": "feature propagation steps K",
        "r": "normalization D^(r-1) A D^(-r)",
        "lp-steps": "label propagation steps of the HCS",
        "lp-alpha": "label propagation's weight of the propagated labels",
        "lr": "step 2's Adam learning rate",
        "weight-decay": "step 2's Adam weight decay",
    },
    check=check_config,
    probes=PROBES,
    defaults={"num-rounds": 100},
    demo={"adafgl.fed-rounds": 10, "num-rounds": 20},
)
