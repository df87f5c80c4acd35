"""FedDEP's run options (``feddep.*``), probes and validation (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass

from fgl_flower.config import MethodOptions, RunConfig
from fgl_flower.errors import ConfigError
from fgl_flower.methods.spec import MethodSpec
from fgl_flower.probes import Probe

#: Reply/record names of the generator rounds' payloads (besides the model).
GENERATED = "feddep.generated"  # client -> server: "feats" [N', K, H], "pred" [N']
CROSS = "feddep.cross"  # server -> client j: the others' GENERATED as "<key>.<pid>"
GRADIENTS = "feddep.gradients"  # j -> server: "grad.<pid>" [N'_i, K, H]; server -> i: "grad"
#: Config key of the generator rounds' train messages: the clients in the round (M).
ROUND_CLIENTS = "feddep.clients"
#: ``empty-slot``: the codes' signed-sum test, or only all-zero slots.
EMPTY_SLOT = ("sum", "zero")
#: ``trainable``: the embedding head only (official code), or the whole LocalDGen (OpenFGL).
TRAINABLE = ("fgen", "all")

PROBES = (
    Probe(
        "feddep.cross-grad",
        "generator rounds: ||gradient of the other clients' reconstruction losses|| / "
        "||gradient of the client's own loss||, on its generated embeddings",
        dead_below=1e-6,
        why="No other client's prototypes reach the generator: each client's generator is "
        "trained alone (FedDEP without its federated step).",
    ),
    Probe(
        "feddep.proto-gap",
        "generator rounds: mean ||h_v - p(v)|| / mean ||h_v|| between a node's raw embedding "
        "and the prototype that stands in for it in every target that leaves the client",
        dead_below=1e-6,
        why="The prototypes are the raw embeddings (as many clusters as nodes): the targets "
        "other clients read from the gradients are the embeddings themselves.",
    ),
    Probe(
        "feddep.generated",
        "classifier rounds: generated neighbour embeddings per real node (sum of the rounded "
        "predicted counts, at most K each, over the nodes)",
        dead_below=1e-3,
        why="The generator adds no neighbour: FedDEP is FedAvg of its classifier with the "
        "embedding input zero.",
    ),
    Probe(
        "feddep.emb-effect",
        "classifier rounds: ||logits of the real nodes with their mended embeddings - with "
        "them zero|| / ||logits with them zero|| (the trained model, evaluation mode)",
        dead_below=1e-4,
        why="The generated neighbour embeddings change no prediction.",
    ),
)

#: Probes of each phase (the other phase's are recorded as idle, not watched).
GENERATOR_PROBES = ("feddep.cross-grad", "feddep.proto-gap")
CLASSIFIER_PROBES = ("feddep.generated", "feddep.emb-effect")


@dataclass(frozen=True)
class FedDEPOptions(MethodOptions):
    """FedDEP's hyperparameters (OpenFGL's ``feddep_config.py`` where its and the official
    code agree; docs/methods/feddep.md)."""

    num_pred: int = 5  # generated neighbour embeddings per node at most (K)
    num_protos: int = 5  # prototypes (clusters of the node embeddings) per client
    hide_portion: float = 0.5  # share of the validation nodes hidden to train the generator
    encoder_epochs: int = 50  # the embedding encoder's epochs (full batch here)
    kmeans_iters: int = 100  # Lloyd iterations at most of the prototype clustering
    pretrain_epochs: int = 2  # local generator epochs before the federated ones (OpenFGL)
    gen_rounds: int = 3  # federated generator rounds (one step each; OpenFGL's feddep_epochs)
    gen_lr: float = 0.01  # the generator's Adam (OpenFGL: the run's lr and weight decay)
    gen_weight_decay: float = 5e-4
    latent: int = 128  # the generator encoder's output (OpenFGL's gen_hidden)
    gen_dropout: float = 0.5  # the generator's and the embedding encoder's dropout
    beta_d: float = 1.0  # weight of the missing-neighbour count loss
    beta_n: float = 1.0  # ... of the embedding reconstruction losses (own and the others')
    beta_c: float = 1.0  # ... of the internal classifier's loss on the mended impaired graph
    cross: bool = True  # the other clients' reconstruction losses (FedDEP); false: local only
    empty_slot: str = "sum"  # a drawn target slot is empty: signed sum < 1e-15 (codes) | zero
    trainable: str = "fgen"  # what the federated steps train: fgen (official code) | all (OpenFGL)


def check_config(cfg: RunConfig) -> None:
    """Reject settings FedDEP cannot run before anything starts."""
    o = FedDEPOptions.from_config(cfg)
    o.require_at_least_one("feddep", "num_pred", "num_protos", "latent", "kmeans_iters")
    if o.pretrain_epochs < 0 or o.gen_rounds < 0 or o.encoder_epochs < 0:
        raise ConfigError(
            "feddep.pretrain-epochs, feddep.encoder-epochs and feddep.gen-rounds must be >= 0."
        )
    if o.gen_rounds >= cfg.num_rounds:
        raise ConfigError(
            f"feddep.gen-rounds={o.gen_rounds} leaves no classifier round in num-rounds="
            f"{cfg.num_rounds}: the rounds count both phases; raise num-rounds above {o.gen_rounds} "
            f"or lower feddep.gen-rounds."
        )
    if not 0 <= o.gen_dropout < 1:
        raise ConfigError(f"feddep.gen-dropout={o.gen_dropout} must be in [0, 1).")
    if not 0 < o.hide_portion < 1:
        raise ConfigError(f"feddep.hide-portion={o.hide_portion} must be in (0, 1).")
    o.require_choice("feddep", "empty_slot", EMPTY_SLOT)
    o.require_choice("feddep", "trainable", TRAINABLE)
    o.require_nonnegative("feddep", "gen_lr", "gen_weight_decay", "beta_d", "beta_n", "beta_c")
    if cfg.model != "graphsage":
        raise ConfigError(
            f"model={cfg.model!r}: FedDEP's classifier is its own GraphSAGE with an embedding "
            f"branch per layer (the codes' Classifier_F); use model=graphsage."
        )


SPEC = MethodSpec(
    name="feddep",
    strategy="fgl_flower.strategies.feddep:FedDEPStrategy",
    client="fgl_flower.clients.feddep:FedDEPClient",
    space={
        "num-pred": "1..10",
        "num-protos": "2..20",
        "hide-portion": "0.1..0.7",
    },
    tasks=("node",),
    summary="Missing-neighbour generators of node embeddings whose targets are cluster "
    "prototypes, trained across clients (the others' reconstruction losses as "
    "gradients), then FedAvg of a GraphSAGE fed each node's generated neighbour embeddings.",
    reference="Zhang et al., FedDEP, SDM 2024",
    options=FedDEPOptions.defaults(),
    check=check_config,
    probes=PROBES,
    query_actions=("generate", "cross_grad"),
    own_init=True,
    defaults={"num-rounds": 40, "model": "graphsage"},
    config_note="node tasks, model graphsage; OpenFGL's values (docs/methods/feddep.md)",
    option_help={
        "num-pred": "generated neighbour embeddings per node at most (K)",
        "num-protos": "prototypes (k-means clusters of the node embeddings) per client",
        "hide-portion": "share of the validation nodes hidden to train the generator",
        "encoder-epochs": "full-batch epochs of the encoder whose embeddings are clustered",
        "kmeans-iters": "Lloyd iterations at most of the prototype clustering",
        "pretrain-epochs": "local generator epochs before the federated rounds",
        "gen-rounds": "federated generator rounds (one step each), counted in num-rounds",
        "gen-lr": "the generator's Adam",
        "gen-weight-decay": "... and its weight decay",
        "latent": "the generator encoder's output width (OpenFGL's gen_hidden)",
        "gen-dropout": "the generator's and the embedding encoder's dropout",
        "beta-d": "weight of the missing-neighbour count loss (smooth L1)",
        "beta-n": "weight of the embedding reconstruction losses (own and the other clients')",
        "beta-c": "weight of the internal classifier's loss on the mended impaired graph",
        "cross": "the other clients' reconstruction losses (FedDEP); false: each generator alone",
        "empty-slot": "a drawn target slot takes the centre's own prototype when its entries sum "
        "below 1e-15 (sum: both codes, also real prototypes with a negative sum) or are all zero "
        "(zero)",
        "trainable": "fgen: the federated steps train the embedding head only (official code); "
        "all: encoder, count head, embedding head and classifier (OpenFGL)",
    },
    # the no-option demo (no dataset named): 2 generator rounds, then classifier rounds
    # the no-option demo: OpenFGL's split (a fifth of the nodes train, two fifths validate), so
    # that hiding half the validation nodes leaves nodes with a missing neighbour to generate;
    # under the app's 0.6/0.2/0.2 every predicted count rounds to 0 there and the probes die
    demo={"num-rounds": 10, "feddep.gen-rounds": 2, "split": "0.2,0.4,0.4"},
)
