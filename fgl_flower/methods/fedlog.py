"""FedLoG's run options (``fedlog.*``), checks, probes and record names (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass

from fgl_flower.config import MethodOptions, RunConfig
from fgl_flower.errors import ConfigError
from fgl_flower.methods.spec import MethodSpec
from fgl_flower.probes import Probe

#: Where the adaptation layers' messages land: ``queries`` (they move the query embeddings)
#: or ``official`` (the code averages them at the prototype end and keeps only the queries'
#: rows, which are zero: the branches are LayerNorm alone).
ADAPTATIONS = ("queries", "official")
#: The per-class neighbour generators that give the global synthetic nodes their neighbours:
#: ``server`` (per class, the class-rate-weighted average of the clients' pretrained
#: generators, what the code's server sets out to compute) or ``official`` (the code's clients
#: never load the server's: they use generators left at their random initialisation).
GENERATORS = ("server", "official")

SYNTHETIC = "fedlog.synthetic"  # record up: syn-head, syn-tail [C k, F], class-rate [C]
GENERATOR = "fedlog.generator"  # record up in a client's first round: its pretrained generator
GLOBAL = "fedlog.global"  # record down: the global synthetic nodes x [C k, F], y [C k]
CLASS_GENERATORS = "fedlog.class-generators"  # record down: per class c, "c<c>.<parameter>"

PROBES = (
    Probe(
        "fedlog.cd-share",
        "the global synthetic data's loss over the local loss, mean over the "
        "round's steps (0 in a client's first round)",
        dead_below=1e-4,
        why="the global synthetic data adds nothing to the local loss: FedLoG's local "
        "generalisation is off",
    ),
    Probe(
        "fedlog.adapt",
        "||adapted - normalised|| / ||normalised|| of the head branch's queries (last step)",
        dead_below=1e-6,
        why="the adaptation layers leave the queries as they are (adaptation = official)",
    ),
    Probe(
        "fedlog.syn-acc", "accuracy of the local model on the global synthetic nodes (last step)"
    ),
    Probe(
        "fedlog.syn-gain",
        "fedlog.syn-acc minus chance (1 / classes), from a client's second round",
        dead_below=0.05,
        why="the local model classifies the global synthetic nodes at chance: they "
        "carry no class information (the clients' synthetic nodes have barely "
        "trained: few local steps before the upload)",
    ),
    Probe(
        "fedlog.scaler",
        "mean over classes of the feature scaler pulling synthetic nodes to their mean",
    ),
)


@dataclass(frozen=True)
class FedLoGOptions(MethodOptions):
    """FedLoG hyperparameters (defaults: the official code's)."""

    num_proto: int = 20  # synthetic nodes per class and branch
    batch_size: int = 64  # training nodes per step
    head_degree: int = (
        3  # tau: degree above which a node counts as head (alpha = sigmoid(deg - tau - 1))
    )
    pre_epochs: int = 100  # local pretraining of embedder + classifier (first round), at most
    patience: int = 10  # ... stopped after this many epochs without a better validation accuracy
    gen_epochs: int = 100  # neighbour-generator pretraining (first round)
    gen_inits: int = 20  # random GNNs per generator epoch for the gradient matching
    gen_lr: float = 0.01
    metric_weight: float = 1.0
    norm_weight: float = 1.0  # of the synthetic features' norms
    cd_weight: float = 1.0  # of the global synthetic data's loss
    scaler_step: float = 0.001
    scaler_acc: float = 0.8  # per-class accuracy above which the scaler grows
    adaptation: str = "queries"
    generators: str = "server"


def check_config(cfg: RunConfig) -> None:
    """Reject settings FedLoG cannot run before anything starts."""
    o = FedLoGOptions.from_config(cfg)
    if cfg.model not in ("graphsage", "sage"):
        raise ConfigError(
            f"fedlog's embedder is GraphSAGE (F -> 2 hidden -> hidden), as in its code; "
            f"model={cfg.model!r} would be ignored. Use model='graphsage'."
        )
    o.require_choice("fedlog", "adaptation", ADAPTATIONS)
    o.require_choice("fedlog", "generators", GENERATORS)
    o.require_at_least_one("fedlog", "num_proto", "batch_size", "gen_inits")
    o.require_nonnegative(
        "fedlog",
        "pre_epochs",
        "patience",
        "gen_epochs",
        "metric_weight",
        "norm_weight",
        "cd_weight",
        "scaler_step",
        "head_degree",
    )
    o.require_positive("fedlog", "gen_lr")


SPEC = MethodSpec(
    name="fedlog",
    strategy="fgl_flower.strategies.fedlog:FedLoGStrategy",
    client="fgl_flower.clients.fedlog:FedLoGClient",
    space={
        "metric-weight": "0.1..10:log",
        "num-proto": "5..40",
    },
    tasks=("node",),
    summary="Clients learn class-wise synthetic nodes (head and tail prototypes); the server "
    "condenses them into global synthetic nodes that every client then also trains on.",
    reference="Kim et al., FedLoG, ICLR 2025",
    options=FedLoGOptions.defaults(),
    check=check_config,
    own_init=True,
    probes=PROBES,
    defaults={
        "model": "graphsage",
        "agg-weight": "uniform",
        "lr": 0.001,
        "weight-decay": 5e-4,
        "local-epochs": 1,
    },
    config_note="node tasks; model graphsage (its embedder); one upload and one download: num-rounds = 2",
    option_help={
        "num-proto": "synthetic nodes per class and branch (head, tail)",
        "batch-size": "training nodes per step",
        "head-degree": "tau: the head branch's weight is sigmoid(degree - tau - 1)",
        "pre-epochs": "first round: pretraining of embedder + classifier, at most",
        "patience": "... stopped after this many epochs without a better validation accuracy",
        "gen-epochs": "first round: pretraining of the neighbour generator",
        "gen-inits": "random GNNs per generator epoch for its gradient matching",
        "gen-lr": "the generator's Adam step size",
        "metric-weight": "of the prototype (metric) loss on the local nodes",
        "norm-weight": "of the synthetic features' norms",
        "cd-weight": "of the metric loss on the global synthetic nodes (from round 2)",
        "scaler-step": "per-class scaler step toward the global synthetic mean",
        "scaler-acc": "synthetic accuracy of a class above which its scaler grows",
        "adaptation": "queries (the adaptation layers move the queries) | official (the code: they leave them, LayerNorm only)",
        "generators": "server (clients use the server's per-class generators) | official (the code: untrained ones)",
    },
    # the no-option demo (no dataset named): 5 rounds, shorter pretraining and generators
    demo={"num-rounds": 5, "fedlog.pre-epochs": 20, "fedlog.gen-epochs": 5, "fedlog.gen-inits": 5},
)
