"""Model registry: name -> builder, with the task each model serves."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

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


def build_model(
    name: str,
    task: str,
    in_channels: int,
    out_channels: int,
    hidden: int,
    num_layers: int,
    dropout: float,
) -> nn.Module:
    """Build backbone ``name`` for ``task``; raises a clear error on a task mismatch."""
    spec = MODELS.get(name)
    if spec.task != task:
        others = [n for n, s in MODELS.items() if s.task == task]
        raise ConfigError(
            f"Model {name!r} is for {spec.task}-level tasks, but this dataset is {task}-level. "
            f"Use one of: {', '.join(others)}."
        )
    return spec.cls(in_channels, hidden, out_channels, num_layers, dropout)
