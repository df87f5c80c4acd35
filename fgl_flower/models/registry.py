"""Model registry: name -> builder, with the task each model serves.

Torch-free to import: entries name their class as ``"module:Class"`` and the class is
imported when a model is built, so validating a config or choosing a model imports
nothing heavy (a GCN run never imports PyG's layers).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fgl_flower.errors import ConfigError
from fgl_flower.registry import Registry, import_object

if TYPE_CHECKING:
    from torch import nn

    from fgl_flower.config import RunConfig


@dataclass(frozen=True)
class ModelSpec:
    """How to build one backbone.

    Attributes:
        cls: Module class taking ``(in_channels, hidden_channels, out_channels,
            num_layers, dropout)``, or its ``"module:Class"`` path.
        task: ``"node"`` or ``"graph"``.
        embeds: The model has ``embed(x, edge_index) -> [N, d]`` node representations and
            a linear ``classifier`` (what S2FGL needs).
        hidden: The model has ``embed(x, edge_index) -> [N, d]``, the representations its
            last layer reads (what FGSSL compares); true wherever ``embeds`` is.
    """

    cls: Callable[..., Any] | str
    task: str
    embeds: bool = False
    hidden: bool = False

    def model_class(self) -> Callable[..., nn.Module]:
        """The class (imported now if registered by path)."""
        return import_object(self.cls)


MODELS: Registry[ModelSpec] = Registry("model")

for _names, _cls, _task, _embeds, _hidden in (
    (("gcn",), "fgl_flower.models.node:GCN", "node", False, True),
    (("mlp",), "fgl_flower.models.node:MLP", "node", False, True),
    (("gcn-concat",), "fgl_flower.models.node:ConcatGCN", "node", False, False),
    (("sgc",), "fgl_flower.models.pyg:SGC", "node", False, False),
    (("graphsage", "sage"), "fgl_flower.models.pyg:GraphSAGE", "node", False, True),
    (("gat",), "fgl_flower.models.pyg:GAT", "node", False, True),
    (("acmgcn", "acm-gcn"), "fgl_flower.models.acmgcn:ACMGCN", "node", True, True),
    (("gin",), "fgl_flower.models.graph:GIN", "graph", False, False),
):
    for _name in _names:
        MODELS.register(_name, ModelSpec(_cls, _task, _embeds, _hidden))

#: The backbone of each task where the run leaves ``model`` at the app's default and that
#: default serves the other task (the app's default, ``gcn``, is node-level).
TASK_DEFAULT_MODEL = {"node": "gcn", "graph": "gin"}


def model_for_task(model: str, task: str) -> str:
    """``model`` if it serves ``task``, else the task's default backbone (unknown names are
    returned as given, for the run's checks to name)."""
    if model not in MODELS or MODELS.get(model).task == task:
        return model
    return TASK_DEFAULT_MODEL[task]


def build_run_model(cfg: RunConfig, task: str, in_channels: int, out_channels: int) -> nn.Module:
    """The run's backbone for ``task``: :func:`build_model` with the run config's ``model``,
    ``hidden``, ``num-layers``, ``dropout`` and ``model-init`` (every place that builds the
    run's model builds it here)."""
    return build_model(
        cfg.model,
        task,
        in_channels,
        out_channels,
        cfg.hidden,
        cfg.num_layers,
        cfg.dropout,
        cfg.model_init,
    )


def require_embeds(model: str, method: str, why: str) -> None:
    """Raise :class:`ConfigError` unless backbone ``model`` has ``embed()`` and a linear
    ``classifier`` (:attr:`ModelSpec.embeds`); ``why`` says what ``method`` needs them for."""
    _require(model, "embeds", f"{method} {why} (embed() + classifier)")


def require_hidden(model: str, method: str, why: str) -> None:
    """Raise :class:`ConfigError` unless backbone ``model`` has ``embed()``, the
    representations its last layer reads (:attr:`ModelSpec.hidden`); ``why`` says what
    ``method`` needs them for."""
    _require(model, "hidden", f"{method} {why} (embed())")


def _require(model: str, flag: str, needs: str) -> None:
    if not getattr(MODELS.get(model), flag):
        have = [n for n, s in MODELS.items() if getattr(s, flag)]
        raise ConfigError(f"{needs}; model={model!r} has none. Use one of: {', '.join(have)}.")


#: Parameter initialisations, selected by the ``model-init`` run-config key.
INITS: Registry[Callable[[nn.Module], None]] = Registry("model-init")


@INITS.register("default")
def _default_init(model: nn.Module) -> None:
    """Keep each layer's own initialisation (PyG's defaults)."""


@INITS.register("uniform01")
def uniform01_init(model: nn.Module) -> None:
    """Every parameter, weights and biases, drawn from :math:`U[0, 1)`.

    This is what FedSpray's official code does to all its GNN backbones (spec §2.2); it is
    offered to reproduce that paper's baselines under the same initialisation.
    """
    import torch

    with torch.no_grad():
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
    initialise = INITS.get(init)
    model = spec.model_class()(in_channels, hidden, out_channels, num_layers, dropout)
    initialise(model)
    return model
