"""FedTAD's run options (``fedtad.*``), probes and validation (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass

from fgl_flower.config import MethodOptions, RunConfig
from fgl_flower.errors import ConfigError
from fgl_flower.methods.spec import MethodSpec
from fgl_flower.probes import Probe

#: Reply record with a client's class-wise knowledge reliability (``ckr``, ``[C]``) and its
#: model's input width and classes (``shape``: ``[F, C]``), so the server can build the model.
RELIABILITY = "fedtad.reliability"

#: Measured by the server on each round's distillation.
PROBES = (
    Probe(
        "fedtad.distill-shift",
        "relative change of the global parameters by the server's "
        "distillation, ||theta_distilled - theta_avg|| / ||theta_avg||",
        dead_below=1e-6,
        why="The distillation leaves the averaged model as it is: FedTAD is FedAvg.",
    ),
    Probe(
        "fedtad.pseudo-acc",
        "share of the generated nodes that the clients' models (mean over "
        "the clients) assign to the class the generator was asked for",
    ),
    Probe(
        "fedtad.ckr-spread",
        "largest minus smallest client weight of a class in the "
        "distillation (CKR normalised over the clients), mean over the classes",
    ),
)


@dataclass(frozen=True)
class FedTADOptions(MethodOptions):
    """FedTAD's hyperparameters (the official code's defaults, ``train_fedtad.py``)."""

    glb_epochs: int = 5  # distillation epochs per round, each with a fresh noise draw
    it_g: int = 1  # generator steps per distillation epoch
    it_d: int = 5  # global-model steps per distillation epoch
    lr_g: float = 1e-3  # generator Adam (weight decay: the run's weight-decay)
    lr_d: float = 1e-3  # global-model Adam on the server (weight decay: the run's)
    num_gen: int = 100  # generated nodes (the pseudo-graph)
    noise_dim: int = 32  # width of the generator's noise input
    topk: int = 5  # each generated node's k most similar nodes (itself included) are linked
    lam1: float = 1.0  # weight of the semantic (cross-entropy) loss of the generator
    lam2: float = 1.0  # weight of its diversity loss
    walk_length: int = 5  # random walks of lengths 1..L form the topology embedding of the CKR
    always_dropout: bool = (
        False  # true: dropout on in every forward of the distillation (the official GCN's)
    )
    finetune_epochs: int = 0  # > 0: evaluate copies of the global model fine-tuned locally (O-pFGL's one-shot protocol)


def check_config(cfg: RunConfig) -> None:
    o = FedTADOptions.from_config(cfg)
    o.require_at_least_one(
        "fedtad", "glb_epochs", "it_g", "it_d", "num_gen", "noise_dim", "topk", "walk_length"
    )
    o.require_nonnegative("fedtad", "lr_g", "lr_d", "lam1", "lam2")
    if o.topk > o.num_gen:
        raise ConfigError(
            f"fedtad.topk={o.topk} exceeds fedtad.num-gen={o.num_gen}: a generated node "
            f"cannot have more neighbours than there are generated nodes."
        )


SPEC = MethodSpec(
    name="fedtad",
    strategy="fgl_flower.strategies.fedtad:FedTADStrategy",
    client="fgl_flower.clients.fedtad:FedTADClient",
    space={
        "lam1": "0.1..10:log",
        "lam2": "0.1..10:log",
    },
    tasks=("node",),
    summary="FedAvg plus data-free distillation on the server: a generator builds a pseudo-graph "
    "on which the global model learns the clients' class-wise reliable predictions.",
    reference="Zhu et al., FedTAD, IJCAI 2024",
    options=FedTADOptions.defaults(),
    check=check_config,
    probes=PROBES,
    defaults={"num-rounds": 100, "agg-weight": "local"},
    config_note="node tasks; official code: GCN, 100 rounds of 3 epochs, FedAvg weights by client node counts",
    option_help={
        "glb-epochs": "distillation epochs per round on the server, each with fresh noise",
        "it-g": "generator steps per distillation epoch",
        "it-d": "global-model steps per distillation epoch",
        "lr-g": "generator Adam (weight decay: the run's weight-decay)",
        "lr-d": "the server's Adam on the global model",
        "num-gen": "generated nodes of the pseudo-graph",
        "noise-dim": "noise width of the generator",
        "topk": "each generated node linked to its k most similar (itself included)",
        "lam1": "weight of the generator's semantic (cross-entropy) loss",
        "lam2": "weight of its diversity loss",
        "walk-length": "random walks of lengths 1..L in the topology embedding of the CKR",
        "always-dropout": "true: dropout on in every forward of the server's distillation (the official GCN ignores eval())",
        "finetune-epochs": '> 0: evaluate copies of the global model fine-tuned locally for this many epochs (O-pFGL\'s one-round protocol, "+ft")',
    },
    # the no-option demo (no dataset named): 5 of the protocol's 100 rounds, one distillation
    # epoch a round (its five take about 7 s a round on the synthetic graph, 2 cores)
    demo={"num-rounds": 5, "fedtad.glb-epochs": 1},
)
