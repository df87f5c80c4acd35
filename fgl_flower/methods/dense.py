"""DENSE's run options (``dense.*``), checks and probes (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass

from fgl_flower.config import MethodOptions, RunConfig
from fgl_flower.errors import ConfigError
from fgl_flower.methods.spec import MethodSpec
from fgl_flower.probes import Probe

#: The generator's output heads (:class:`fgl_flower.models.dense.FeatureGenerator`).
GENERATOR_HEADS = ("sigmoid", "linear")

#: Reply record with the client model's input width and classes (``shape``: ``[F, C]``), so
#: that the server can rebuild the uploaded models.
SHAPE = "dense.shape"

#: Measured by the server on its distillation.
PROBES = (
    Probe(
        "dense.teacher-fit",
        "share of the last synthetic graph that the clients' ensemble assigns "
        "to the class the generator aimed it at, above chance: (share - 1/C) / (1 - 1/C)",
        dead_below=0.05,
        why="the generator finds no class-typical inputs: the synthetic data is "
        "noise to the ensemble, and the distillation copies the ensemble on noise",
    ),
    Probe(
        "dense.pool-fit",
        "share of all the pooled synthetic nodes that the clients' ensemble (its final "
        "weights) assigns to the class the generator aimed them at, above chance",
        dead_below=0.05,
        why="the syntheses stopped carrying the classes they were made for (an adversarial term can outweigh "
        "the cross-entropy): the student is distilled on inputs that the ensemble itself sorts into few classes",
    ),
    Probe(
        "dense.agreement",
        "share of all synthetic nodes on which the distilled model's class equals "
        "the ensemble's, after distillation",
        dead_below=0.2,
        why="the global model did not learn the ensemble on the synthetic data",
    ),
    Probe(
        "dense.live-units",
        "share of the distilled model's last hidden layer units (its input to the "
        "output layer, after ReLU) that are positive on at least one pooled synthetic node",
        dead_below=0.1,
        why="the student's ReLUs died: it gives every synthetic input nearly the same output (the synthetic "
        "features are near-collinear dense vectors, so one large step can switch a unit off for all of them)",
    ),
)


@dataclass(frozen=True)
class DENSEOptions(MethodOptions):
    """DENSE's hyperparameters (the official README's distillation command: 200 epochs, 30
    generator steps, lr_g 1e-3, T 20, oh = adv = 1, student SGD lr 0.005 with momentum 0.9,
    batches of 256; BN regularisation has no BatchNorm to act on in a GCN)."""

    epochs: int = 200  # distillation epochs: a fresh generator, one synthetic graph added to the pool, KD over the pool
    g_steps: int = 30  # generator (and noise) Adam steps per epoch
    lr_g: float = 1e-3  # the generator's Adam (betas 0.5, 0.999)
    noise_dim: int = 256  # nz
    num_gen: int = 256  # nodes per synthetic graph (the synthesis batch)
    topk: int = (
        5  # kNN pseudo-graph over the generated features (FedTAD's construction, as O-pFGL ran it)
    )
    temperature: float = 20.0  # T of the distillation's KL
    oh: float = 1.0  # weight of the ensemble's cross-entropy to the sampled classes
    adv: float = 1.0  # weight of the adversarial term (student-ensemble disagreement)
    kd_lr: float = 0.005  # student SGD learning rate (momentum 0.9)
    batch_graphs: int = 8  # pooled graphs whose union a student step runs on (loss on num-gen of its nodes); 0: as the official loader
    finetune_epochs: int = 0  # > 0: evaluate copies fine-tuned locally (O-pFGL ran DENSE so)
    generator_head: str = (
        "sigmoid"  # the generator's output: sigmoid (DENSE's image generator) | linear (FedTAD's)
    )


def check_config(cfg: RunConfig) -> None:
    o = DENSEOptions.from_config(cfg)
    o.require_at_least_one("dense", "epochs", "g_steps", "noise_dim", "num_gen", "topk")
    o.require_positive("dense", "lr_g", "kd_lr", "temperature")
    o.require_nonnegative("dense", "oh", "adv", "finetune_epochs", "batch_graphs")
    o.require_choice("dense", "generator_head", GENERATOR_HEADS)
    if o.topk > o.num_gen:
        raise ConfigError(f"dense.topk={o.topk} exceeds dense.num-gen={o.num_gen}.")
    if cfg.num_rounds != 1:
        raise ConfigError(
            f"dense is one-shot: one upload, one download; set num-rounds=1 (got {cfg.num_rounds})."
        )


SPEC = MethodSpec(
    name="dense",
    strategy="fgl_flower.strategies.dense:DENSEStrategy",
    client="fgl_flower.clients.dense:DENSEClient",
    space={
        "kd-lr": "0.001..0.05:log",
        "temperature": "1..30",
    },
    tasks=("node",),
    summary="One-shot: the clients' models up once; the server distils their ensemble into a "
    "fresh model on generated node features (kNN graph), clients fine-tune it.",
    reference="Zhang et al., DENSE, NeurIPS 2022",
    options=DENSEOptions.defaults(),
    check=check_config,
    probes=PROBES,
    fixed_rounds=1,
    config_note="one-shot; needs num-rounds = 1 (the official README's distillation settings)",
    option_help={
        "epochs": "distillation epochs: a fresh generator, one synthetic graph into the pool, KD over the pool",
        "g-steps": "generator and noise Adam steps per epoch",
        "lr-g": "the generator's Adam (betas 0.5, 0.999)",
        "noise-dim": "nz",
        "num-gen": "nodes per synthetic graph",
        "topk": "kNN pseudo-graph over the generated features (FedTAD's construction)",
        "temperature": "T of the distillation's KL",
        "oh": "weight of the ensemble's cross-entropy to the sampled classes",
        "adv": "weight of the adversarial (student-ensemble disagreement) term",
        "kd-lr": "student SGD learning rate (momentum 0.9)",
        "batch-graphs": "pooled graphs a student step runs on (loss on num-gen of their nodes); 0: the official loader's batches (a forward over ~the whole pool per step)",
        "finetune-epochs": "> 0: evaluate copies fine-tuned locally (O-pFGL's protocol)",
        "generator-head": "the generator's output: sigmoid (DENSE's image generator, features in [0, 1]) | linear (FedTAD's)",
    },
    # the no-option demo (no dataset named): 2 of the distillation's 200 epochs, 5 of its 30
    # generator steps (about 11 s an epoch on the synthetic graph with the defaults, 2 cores)
    demo={"dense.epochs": 2, "dense.g-steps": 5},
)
