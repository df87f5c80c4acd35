"""Co-Boost's run options (``coboost.*``), checks and probes (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass

from fgl_flower.config import RunConfig
from fgl_flower.errors import ConfigError
from fgl_flower.methods.dense import PROBES as DENSE_PROBES, DENSEOptions
from fgl_flower.probes import Probe

PROBES = DENSE_PROBES + (
    Probe("coboost.weight-spread", "largest minus smallest client weight of the ensemble after the "
          "distillation (1/K each at the start)", dead_below=1e-6,
          why="the ensemble's weights never moved: Co-Boost's ensemble boosting is off"),
    Probe("coboost.target-sharpness", "the distillation targets' mean largest probability (the ensemble "
          "at the KD temperature on the pooled nodes), as a share of the way from 1/C to 1", dead_below=0.05,
          why="the ensemble's distillation targets are uniform: the student learns nothing from them"),
    Probe("coboost.effective-clients", "(sum w)^2 / sum w^2 of the ensemble weights after the distillation: "
          "K when equal, 1 when one client's model is the whole teacher"),
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
    ods_eta: float = 4 / 255  # on-the-fly input perturbation: the code's 8/255 on images normalised to [-1, 1]


def check_config(cfg: RunConfig) -> None:
    o = CoBoostOptions.from_config(cfg)
    o.require_at_least_one("coboost", "epochs", "g_steps", "noise_dim", "num_gen", "topk")
    o.require_positive("coboost", "lr_g", "kd_lr", "temperature", "adv_temperature")
    o.require_nonnegative("coboost", "oh", "adv", "hs", "mu", "wdc", "wa_steps", "ods_eta", "kd_weight_decay",
                          "finetune_epochs", "batch_graphs")
    if o.topk > o.num_gen:
        raise ConfigError(f"coboost.topk={o.topk} exceeds coboost.num-gen={o.num_gen}.")
    if cfg.num_rounds != 1:
        raise ConfigError(f"coboost is one-shot: one upload, one download; set num-rounds=1 (got {cfg.num_rounds}).")
