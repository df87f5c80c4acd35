"""Co-Boost's run options (``coboost.*``), checks and probes (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass

from fgl_flower.config import RunConfig
from fgl_flower.errors import ConfigError
from fgl_flower.methods.dense import PROBES as DENSE_PROBES
from fgl_flower.methods.dense import DENSEOptions
from fgl_flower.methods.spec import MethodSpec
from fgl_flower.probes import Probe

PROBES = DENSE_PROBES + (
    Probe(
        "coboost.weight-spread",
        "largest minus smallest client weight of the ensemble after the "
        "distillation (1/K each at the start)",
        dead_below=1e-6,
        why="the ensemble's weights never moved: Co-Boost's ensemble boosting is off",
    ),
    Probe(
        "coboost.target-sharpness",
        "the distillation targets' mean largest probability (the ensemble "
        "at the KD temperature on the pooled nodes), as a share of the way from 1/C to 1",
        dead_below=0.05,
        why="the ensemble's distillation targets are uniform: the student learns nothing from them",
    ),
    Probe(
        "coboost.effective-clients",
        "(sum w)^2 / sum w^2 of the ensemble weights after the distillation: "
        "K when equal, 1 when one client's model is the whole teacher",
    ),
)


@dataclass(frozen=True)
class CoBoostOptions(DENSEOptions):
    """Co-Boost's hyperparameters (the official ``co_boosting.sh`` and ``datafree_kd.py``
    defaults): DENSE's synthesis with batches of 128 and hard-sample weighting, a weighted
    ensemble adjusted every epoch, on-the-fly perturbed distillation at T = 4."""

    num_gen: int = 128  # synthesis batch
    temperature: float = 4.0  # kd_T
    kd_lr: float = 0.01  # student SGD (momentum 0.9, cosine annealing over the epochs)
    kd_weight_decay: float = 1e-4  # the student's weight decay
    hs: float = 1.0  # hard-sample exponent: CE weighted by (1 - p_target)^hs
    adv_temperature: float = 3.0  # T of the adversarial KL
    mu: float = 0.01  # step of the ensemble weights' signed gradient, times wdc^epoch
    wdc: float = 0.99
    wa_steps: int = 1  # passes over the pool adjusting the ensemble weights per epoch
    ods_eta: float = (
        4 / 255
    )  # on-the-fly input perturbation: the code's 8/255 on images normalised to [-1, 1]


def check_config(cfg: RunConfig) -> None:
    o = CoBoostOptions.from_config(cfg)
    o.require_at_least_one("coboost", "epochs", "g_steps", "noise_dim", "num_gen", "topk")
    o.require_positive("coboost", "lr_g", "kd_lr", "temperature", "adv_temperature")
    o.require_nonnegative(
        "coboost",
        "oh",
        "adv",
        "hs",
        "mu",
        "wdc",
        "wa_steps",
        "ods_eta",
        "kd_weight_decay",
        "finetune_epochs",
        "batch_graphs",
    )
    if o.topk > o.num_gen:
        raise ConfigError(f"coboost.topk={o.topk} exceeds coboost.num-gen={o.num_gen}.")
    if cfg.num_rounds != 1:
        raise ConfigError(
            f"coboost is one-shot: one upload, one download; set num-rounds=1 (got {cfg.num_rounds})."
        )


SPEC = MethodSpec(
    name="coboost",
    strategy="fgl_flower.strategies.coboost:CoBoostStrategy",
    client="fgl_flower.clients.dense:DENSEClient",
    space={
        "kd-lr": "0.001..0.1:log",
        "temperature": "1..10",
    },
    tasks=("node",),
    summary="One-shot: DENSE's distillation with hard-sample synthesis, an ensemble whose client "
    "weights are boosted on the synthetic data, and perturbed distillation.",
    reference="Dai et al., Co-Boosting, ICLR 2024",
    options=CoBoostOptions.defaults(),
    check=check_config,
    probes=PROBES,
    fixed_rounds=1,
    config_note="one-shot; needs num-rounds = 1 (the official co_boosting.sh / datafree_kd.py defaults)",
    option_help={
        "epochs": "distillation epochs",
        "g-steps": "generator and noise steps per epoch",
        "lr-g": "generator Adam (betas 0.5, 0.999), gradients clipped to 10",
        "noise-dim": "nz",
        "num-gen": "nodes per synthetic graph (the synthesis batch)",
        "topk": "kNN pseudo-graph (FedTAD's construction)",
        "temperature": "kd_T of the distillation's KL",
        "oh": "weight of the hard-sample cross-entropy",
        "adv": "weight of the adversarial KL",
        "kd-lr": "student SGD (momentum 0.9, cosine annealing), gradients clipped to 10",
        "batch-graphs": "pooled graphs a student step runs on (loss on num-gen of their nodes); 0: the official loader's batches",
        "finetune-epochs": "> 0: evaluate copies fine-tuned locally (O-pFGL's protocol)",
        "kd-weight-decay": "the student's weight decay",
        "hs": "hard-sample exponent: CE weighted by (1 - p_target)^hs",
        "adv-temperature": "T of the adversarial KL",
        "mu": "step of the ensemble weights' signed gradient (times wdc^epoch)",
        "wdc": "its decay per epoch",
        "wa-steps": "passes over the pool adjusting the ensemble weights per epoch",
        "generator-head": "the generator's output: sigmoid (the code's image generator, features in [0, 1]) | linear (FedTAD's)",
        "ods-eta": "4/255: on-the-fly perturbation of the pooled features in [0, 1] (the code's 8/255 on images in [-1, 1])",
    },
    # the no-option demo (no dataset named): 2 of the distillation's 200 epochs, 5 of its 30
    # generator steps (about 13 s an epoch on the synthetic graph with the defaults, 2 cores)
    demo={"coboost.epochs": 2, "coboost.g-steps": 5},
)
