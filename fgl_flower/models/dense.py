r"""DENSE's server-side pieces (Zhang et al., "DENSE: Data-Free One-Shot Federated Learning",
NeurIPS 2022), for node features: the generator and the distillation losses.

The official generator maps noise to images; here it maps noise :math:`\mathbf z \in \mathbb
R^{n \times d_z}` to node features, ``Linear -> BatchNorm -> LeakyReLU(0.2) -> Linear`` (the
official blocks' normalisation and activations) with one of two heads: ``sigmoid`` (the
official image generator's, features in :math:`[0, 1]`, near 0.5 in every dimension at the
start) or ``linear`` (FedTAD's generator's unbounded output, the only generator in O-pFGL's
released code; near 0 at the start). Like the official code, the generator is reset at every
epoch (weights :math:`\mathcal N(0, 0.02)`, BatchNorm scales :math:`\mathcal N(1, 0.02)`,
biases 0), and the noise is optimised with it.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from fgl_flower.methods.dense import GENERATOR_HEADS

HIDDEN = 256  # the generator's hidden width


class FeatureGenerator(nn.Module):
    """``forward(z [n, noise_dim]) -> features [n, num_features]``."""

    def __init__(self, noise_dim: int, num_features: int, head: str = "sigmoid") -> None:
        super().__init__()
        if head not in GENERATOR_HEADS:
            raise ValueError(f"head={head!r}: use one of {', '.join(GENERATOR_HEADS)}.")
        self.net = nn.Sequential(
            nn.Linear(noise_dim, HIDDEN),
            nn.BatchNorm1d(HIDDEN),
            nn.LeakyReLU(0.2),
            nn.Linear(HIDDEN, num_features),
            *([nn.Sigmoid()] if head == "sigmoid" else []),
        )

    def forward(self, z: Tensor) -> Tensor:
        return self.net(z)

    def reset(self) -> None:
        """The official ``reset_model``."""
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0.0, 0.02)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.BatchNorm1d):
                nn.init.normal_(m.weight, 1.0, 0.02)
                nn.init.zeros_(m.bias)


def kd_loss(student: Tensor, teacher: Tensor, temperature: float) -> Tensor:
    r""":math:`T^2\,\mathrm{KL}(\mathrm{softmax}(t/T) \,\|\, \mathrm{softmax}(s/T))`, batch mean
    (the official ``KLDiv``)."""
    return (
        F.kl_div(
            F.log_softmax(student / temperature, -1),
            F.softmax(teacher / temperature, -1),
            reduction="batchmean",
        )
        * temperature**2
    )


def adversarial_loss(student: Tensor, teacher: Tensor) -> Tensor:
    r"""Minus the mean KL(teacher ‖ student) over the rows where their classes differ (zero
    elsewhere): the generator seeks inputs on which the student still disagrees."""
    disagree = (student.argmax(-1) != teacher.argmax(-1)).float()
    per_row = F.kl_div(F.log_softmax(student, -1), F.softmax(teacher, -1), reduction="none").sum(-1)
    return -(per_row * disagree).mean()
