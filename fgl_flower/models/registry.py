"""Model registry: name -> builder, with the task each model serves."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from fgl_flower.errors import ConfigError
from fgl_flower.registry import Registry


@dataclass(frozen=True)
class ModelSpec:
    """How to build one backbone.

    Attributes:
        cls: Module class taking ``(in_channels, hidden_channels, out_channels,
            num_layers, dropout)``.
        task: ``"node"`` or ``"graph"``.
    """

    cls: Callable[..., nn.Module]
    task: str


MODELS: Registry[ModelSpec] = Registry("model")

#: Parameter initialisations, selected by the ``model-init`` run-config key.
INITS: Registry[Callable[[nn.Module], None]] = Registry("model-init")


@INITS.register("default")
def _default_init(model: nn.Module) -> None:
    """Keep each layer's own initialisation (PyG's defaults)."""


@INITS.register("uniform01")
@torch.no_grad()
def uniform01_init(model: nn.Module) -> None:
    """Every parameter, weights and biases, drawn from :math:`U[0, 1)`.

    This is what FedSpray's official code does to all its GNN backbones (spec §2.2); it is
    offered to reproduce that paper's baselines under the same initialisation.
    """
    for p in model.parameters():
        p.uniform_()


def build_model(
    name: str,
    task: str,
    in_channels: int,
    out_channels: int,
    hidden: int,
    num_layers: int,
    dropout: float,
    init: str = "default",
) -> nn.Module:
    """Build backbone ``name`` for ``task`` and initialise it with ``INITS[init]``.

    Raises a clear error on a task mismatch or an unknown initialisation.
    """
    spec = MODELS.get(name)
    if spec.task != task:
        others = [n for n, s in MODELS.items() if s.task == task]
        raise ConfigError(
            f"Model {name!r} is for {spec.task}-level tasks, but this dataset is {task}-level. "
            f"Use one of: {', '.join(others)}."
        )
    model = spec.cls(in_channels, hidden, out_channels, num_layers, dropout)
    INITS.get(init)(model)
    return model
