"""FGGP's run options (``fggp.*``), probes and validation (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass

from fgl_flower.config import MethodOptions, RunConfig
from fgl_flower.errors import ConfigError
from fgl_flower.methods.spec import MethodSpec
from fgl_flower.probes import Probe

#: Reply record with a client's class prototypes (``prototypes [P, d]``, ``classes [P]``,
#: ``num-classes [1]``).
PROTOTYPES = "fggp.prototypes"
#: Message record with the server's prototype memory (``prototypes [Q, d]`` L2-normalised,
#: ``classes [Q]``).
MEMORY = "fggp.memory"

#: What happens to the classifier layer: ``reset`` (the official code: left out of the
#: average and back at its seeded initial weights every round, an auxiliary of one round's
#: training; the prototypes classify) or ``aggregate`` (OpenFGL: averaged like the rest).
HEADS = ("reset", "aggregate")
#: What the evaluation predicts with: ``proto`` (the paper: a k-NN vote of the server's
#: clustered prototypes) or ``head`` (the classifier layer, OpenFGL's; needs head=aggregate).
EVALUATIONS = ("proto", "head")
#: The backbones FGGP trains (``fgl_flower.models.fggp.BODIES``; a contract test keeps them equal).
BACKBONES = ("gcn", "acmgcn")

PROBES = (
    Probe(
        "fggp.contrast-grad",
        "||grad of the weighted prototype contrast w.r.t. both views' "
        "features|| / ||grad of the cross-entropy w.r.t. the clean features||, mean over the "
        "round's probed local steps (fggp.probe-every)",
        dead_below=1e-3,
        why="The prototype contrast between the clean and the augmented view does not move "
        "the features.",
    ),
    Probe(
        "fggp.view-grad",
        "||grad of the augmented view's weighted cross-entropy w.r.t. the "
        "augmentor|| / ||grad of its weighted reconstruction loss w.r.t. it||, mean over the "
        "round's probed local steps: the task's pull on the edge sampler through the straight-through "
        "draw",
        dead_below=1e-4,
        why="The augmentor does not learn from the task, only to reconstruct the k-NN graph.",
    ),
    Probe(
        "fggp.knn-new-edges",
        "share of the augmented graph's edges (without self-loops) that the "
        "global model's k-NN graph adds to the client's own",
        dead_below=1e-6,
        why="The global model's k-NN graph adds no edge: no global knowledge enters the view.",
    ),
    Probe(
        "fggp.memory",
        "prototypes in the server's memory after the round (server)",
        dead_below=1,
        why="The server holds no prototypes: nothing classifies.",
    ),
    Probe("fggp.clusters", "mean FINCH clusters per class of the round's uploads (server)"),
    Probe(
        "fggp.proto-margin",
        "at evaluation: mean over the client's classes of the highest cosine of "
        "its training-node prototype to a memory prototype of its class minus that to another "
        "class (undefined, and dead, without a memory)",
        dead_below=-2.0,
        why="No prototype memory reached the client.",
    ),
)


@dataclass(frozen=True)
class FGGPOptions(MethodOptions):
    """FGGP's hyperparameters: the official code's where it has them (the paper's text was not
    available offline; docs/methods/fggp.md)."""

    head: str = "reset"
    evaluate: str = "proto"
    knn_k: int = 3  # neighbours of each node in the global model's k-NN graph
    knn_every: int = (
        10  # rounds between rebuilds of that graph (the code's value for citation graphs)
    )
    alpha: float = (
        0.5  # weight of the learned scores against the k-NN graph in the edge probabilities
    )
    temperature: float = 1.0  # of the relaxed Bernoulli edge draw
    tau: float = 0.5  # prototype-contrast temperature
    contrast_weight: float = 1.0
    view_weight: float = 1.0  # the augmented view's cross-entropy
    reconstruction_weight: float = 1.0  # the augmentor's graph-reconstruction loss
    eval_k: int = 20  # prototypes voting for a node (the code's value for citation graphs)
    eval_tau: float = 0.1  # softmax temperature of their votes
    memory_size: int = 10  # the memory keeps memory-size x classes prototypes (FIFO)
    dense_max_nodes: int = 10000  # the augmented view is dense [N, N]: larger clients stop
    #: the gradient probes run on every k-th local step (0, k, 2k, ...) and are means over
    #: those; a probed step costs four partial backward passes, none of which changes the
    #: training (1: every step, the default)
    probe_every: int = 1


def check_config(cfg: RunConfig) -> None:
    """Reject settings FGGP cannot run before anything starts."""
    o = FGGPOptions.from_config(cfg)
    o.require_choice("fggp", "head", HEADS)
    o.require_choice("fggp", "evaluate", EVALUATIONS)
    if o.evaluate == "head" and o.head != "aggregate":
        raise ConfigError(
            "fggp.evaluate=head needs fggp.head=aggregate: with head=reset the global "
            "classifier layer is the untrained initial one."
        )
    if cfg.model not in BACKBONES:
        raise ConfigError(
            f"fggp trains its own copy of a backbone whose hidden layers also propagate over the "
            f"augmentor's dense sampled graph: model={cfg.model!r} is not one; use "
            f"{' or '.join(BACKBONES)} (the official code's GCN family, S2FGL's ACM-GCN)."
        )
    if cfg.num_layers < 2:
        raise ConfigError(
            f"fggp needs num-layers >= 2 (got {cfg.num_layers}): its prototypes "
            f"average the last hidden layer."
        )
    o.require_at_least_one(
        "fggp", "knn_k", "knn_every", "eval_k", "memory_size", "dense_max_nodes", "probe_every"
    )
    if not 0.0 <= o.alpha <= 1.0:
        raise ConfigError(f"fggp.alpha={o.alpha} must be in [0, 1].")
    o.require_positive("fggp", "temperature", "tau", "eval_tau")
    o.require_nonnegative("fggp", "contrast_weight", "view_weight", "reconstruction_weight")


SPEC = MethodSpec(
    name="fggp",
    strategy="fgl_flower.strategies.fggp:FGGPStrategy",
    client="fgl_flower.clients.fggp:FGGPClient",
    space={
        "alpha": "0.1..0.9",
        "tau": "0.1..1:log",
        "contrast-weight": "0.1..10:log",
    },
    tasks=("node",),
    summary="FedAvg of a GCN (or ACM-GCN) trained with a learned edge augmentor over the global model's "
    "k-NN graph and a prototype contrast between the views; the server clusters the clients' "
    "class prototypes (FINCH) into a memory that classifies by k-NN.",
    reference="Wan et al., FGGP, AAAI 2024",
    options=FGGPOptions.defaults(),
    check=check_config,
    own_init=True,
    probes=PROBES,
    defaults={"num-rounds": 100, "agg-weight": "local"},
    config_note="node tasks, its own GCN; the official code's values (docs/methods/fggp.md)",
    option_help={
        "head": "reset: the classifier layer back at its initial weights every round, not averaged (official); aggregate: averaged (OpenFGL)",
        "evaluate": 'proto: k-NN vote of the server\'s prototype memory (paper); head: the classifier layer (needs head = "aggregate")',
        "knn-k": "neighbours per node in the global model's k-NN graph",
        "knn-every": "rounds between its rebuilds",
        "alpha": "learned scores vs k-NN graph in the edge probabilities",
        "temperature": "relaxed Bernoulli edge draw",
        "tau": "prototype-contrast temperature",
        "contrast-weight": "prototype contrast",
        "view-weight": "the augmented view's cross-entropy",
        "reconstruction-weight": "the augmentor's graph reconstruction",
        "eval-k": "memory prototypes voting for a node",
        "eval-tau": "their softmax temperature",
        "memory-size": "the memory keeps memory-size x classes prototypes (FIFO)",
        "dense-max-nodes": "the augmented view is a dense N x N matrix: larger clients stop",
        "probe-every": "gradient probes on every k-th local step, averaged (the training is the same)",
    },
    # the no-option demo (no dataset named): 10 of the protocol's 100 rounds
    demo={"num-rounds": 10},
)
