"""FedSage+'s run options (``fedsageplus.*``), probes and validation (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass

from fgl_flower.config import MethodOptions, RunConfig
from fgl_flower.errors import ConfigError
from fgl_flower.methods.spec import MethodSpec
from fgl_flower.probes import Probe

#: Reply/record names of the generator rounds' payloads (besides the model).
GENERATED = "fedsageplus.generated"  # client -> server: "feats" [T, K, D], "pred" [T], "true" [T]
CROSS = "fedsageplus.cross"  # server -> client j: the others' GENERATED as "<key>.<pid>"
GRADIENTS = "fedsageplus.gradients"  # j -> server: "grad.<pid>" [T_i, K, D]; server -> i: "grad"
#: Config key of the generator rounds' train messages: the clients in the round (M).
ROUND_CLIENTS = "fedsageplus.clients"

#: How generated features are matched to true missing neighbours (models/fedsage.py).
MATCHINGS = ("min", "code")
#: What trains in the federated generator rounds: the feature head (the official code) or
#: the whole generator and its classifier (OpenFGL).
TRAINABLE = ("fgen", "all")

PROBES = (
    Probe(
        "fedsageplus.cross-grad",
        "generator rounds: ||gradient of the other clients' feature "
        "losses|| / ||gradient of the client's own loss||, on its generated features",
        dead_below=1e-6,
        why="No other client's data reaches the generator: FedSage+ is LocSage+.",
    ),
    Probe(
        "fedsageplus.generated",
        "classifier rounds: generated neighbours per node of the mended graph",
        dead_below=1e-3,
        why="The generator adds no neighbour: FedSage+ is FedAvg of the classifier.",
    ),
    Probe(
        "fedsageplus.owner-fit",
        "classifier rounds: 1 - sum_g ||x_g - m(owner g)||^2 / the same "
        "with the owners of the generated rows permuted (m(v): mean features of v's real "
        "neighbours); 0 for identical rows or rows on the wrong nodes, 0.66-0.80 for true "
        "neighbours' features on Cora and Wisconsin",
        dead_below=0.05,
        why="The generated neighbours are no closer to their own node's neighbourhood than to "
        "another node's: they carry nothing of the node they mend (constant rows, noise, or "
        "rows attached to the wrong nodes).",
    ),
    Probe(
        "fedsageplus.feature-effect",
        "classifier rounds: ||logits of the real nodes on the mended "
        "graph - on the original subgraph|| / ||logits on the original||",
        dead_below=1e-4,
        why="The generated neighbours do not change any real node's prediction (OpenFGL's "
        "one-way edges do this).",
    ),
)

#: Probes of each phase (the other phase's are recorded as idle, not watched).
GENERATOR_PROBES = ("fedsageplus.cross-grad",)
CLASSIFIER_PROBES = ("fedsageplus.generated", "fedsageplus.owner-fit", "fedsageplus.feature-effect")


@dataclass(frozen=True)
class FedSagePlusOptions(MethodOptions):
    """FedSage+'s hyperparameters (the official code's where the codes differ, else all three
    codes'; docs/methods/fedsageplus.md)."""

    num_pred: int = 5  # generated neighbours per node at most (K)
    hidden_portion: float = 0.5  # share of the validation nodes hidden to train the generator
    pretrain_epochs: int = 20  # local generator epochs before the federated ones (official code)
    gen_rounds: int = 20  # federated generator rounds (one step each), counted in num-rounds
    gen_lr: float = 1e-3  # the generator's Adam (official code)
    gen_weight_decay: float = 1e-4
    gen_hidden: int = 64  # encoder and internal classifier width
    latent: int = 128  # encoder output
    gen_dropout: float = 0.5  # the generator's dropout (all three codes), not the run's
    loss_count: float = 1.0  # weight of the missing-neighbour count loss
    loss_feat: float = 1.0  # ... of the feature loss (own and the other clients')
    loss_cls: float = 1.0  # ... of the internal classifier's loss on the mended impaired graph
    cross: bool = True  # the other clients' feature losses (FedSage+); false: LocSage+'s generator
    matching: str = "min"  # "code": the codes' matching (in effect the last true neighbour)
    trainable: str = "fgen"  # what the federated generator rounds train
    undirected: bool = True  # generated neighbours linked both ways (false: OpenFGL's one way)


def check_config(cfg: RunConfig) -> None:
    """Reject settings FedSage+ cannot run before anything starts."""
    o = FedSagePlusOptions.from_config(cfg)
    o.require_at_least_one("fedsageplus", "num_pred", "gen_hidden", "latent")
    if o.pretrain_epochs < 0 or o.gen_rounds < 0:
        raise ConfigError("fedsageplus.pretrain-epochs and fedsageplus.gen-rounds must be >= 0.")
    if o.gen_rounds >= cfg.num_rounds:
        raise ConfigError(
            f"fedsageplus.gen-rounds={o.gen_rounds} leaves no classifier round in num-rounds="
            f"{cfg.num_rounds}: the rounds count both phases; raise num-rounds above {o.gen_rounds} "
            f"or lower fedsageplus.gen-rounds."
        )
    if not 0 <= o.gen_dropout < 1:
        raise ConfigError(f"fedsageplus.gen-dropout={o.gen_dropout} must be in [0, 1).")
    if not 0 < o.hidden_portion < 1:
        raise ConfigError(f"fedsageplus.hidden-portion={o.hidden_portion} must be in (0, 1).")
    o.require_nonnegative(
        "fedsageplus", "gen_lr", "gen_weight_decay", "loss_count", "loss_feat", "loss_cls"
    )
    o.require_choice("fedsageplus", "matching", MATCHINGS)
    o.require_choice("fedsageplus", "trainable", TRAINABLE)


SPEC = MethodSpec(
    name="fedsageplus",
    strategy="fgl_flower.strategies.fedsageplus:FedSagePlusStrategy",
    client="fgl_flower.clients.fedsageplus:FedSagePlusClient",
    space={
        "num-pred": "1..10",
        "hidden-portion": "0.1..0.7",
    },
    tasks=("node",),
    summary="Missing-neighbour generators trained across clients (each client's feature loss "
    "also against targets from the others, as gradients), then FedAvg of a GraphSAGE on each "
    "subgraph mended with generated neighbours.",
    reference="Zhang et al., FedSage+, NeurIPS 2021",
    options=FedSagePlusOptions.defaults(),
    check=check_config,
    probes=PROBES,
    query_actions=("generate", "cross_grad"),
    defaults={"num-rounds": 40, "model": "graphsage"},
    config_note="node tasks; the official code's values where the codes differ (docs/methods/fedsageplus.md)",
    option_help={
        "num-pred": "generated neighbours per node at most (K)",
        "hidden-portion": "share of the validation nodes hidden to train the generator",
        "pretrain-epochs": "local generator epochs before the federated rounds",
        "gen-rounds": "federated generator rounds (one step each), counted in num-rounds",
        "gen-lr": "the generator's Adam",
        "gen-weight-decay": "... and its weight decay",
        "gen-hidden": "encoder and internal classifier width",
        "latent": "encoder output width",
        "gen-dropout": "the generator's dropout (all three codes), not the run's",
        "loss-count": "weight of the missing-neighbour count loss (smooth L1)",
        "loss-feat": "weight of the feature losses (own and the other clients')",
        "loss-cls": "weight of the internal classifier's loss on the mended impaired graph",
        "cross": "the other clients' feature losses (FedSage+); false: each generator alone (LocSage+'s)",
        "matching": "min: each generated slot matched to its closest true neighbour; code: the codes' loop (in effect the last)",
        "trainable": "fgen: the federated rounds train the feature head (official code); all: everything (OpenFGL)",
        "undirected": "generated neighbours linked both ways; false: one way, OpenFGL's (they then change no prediction)",
    },
    # the no-option demo (no dataset named): 5 generator rounds and 5 classifier rounds
    demo={"num-rounds": 10, "fedsageplus.gen-rounds": 5},
)
