"""GNN backbones, resolved by name through :data:`MODELS`.

Node models map ``(x [N, F], edge_index [2, E]) -> logits [N, C]``; graph models map a
mini-batch of graphs to ``logits [B, C]``. ``x`` may be a sparse COO tensor.

Importing this package imports no model: the classes below are loaded on first access,
and :func:`build_model` loads only the one it builds.
"""

from __future__ import annotations

from typing import Any

from fgl_flower.models.registry import INITS, MODELS, ModelSpec, build_model, build_run_model
from fgl_flower.registry import import_object

_LAZY = {
    "GCN": "fgl_flower.models.node:GCN",
    "MLP": "fgl_flower.models.node:MLP",
    "SGC": "fgl_flower.models.pyg:SGC",
    "GAT": "fgl_flower.models.pyg:GAT",
    "GraphSAGE": "fgl_flower.models.pyg:GraphSAGE",
    "ACMGCN": "fgl_flower.models.acmgcn:ACMGCN",
    "ACMConv": "fgl_flower.models.acmgcn:ACMConv",
    "GIN": "fgl_flower.models.graph:GIN",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return import_object(_LAZY[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["INITS", "MODELS", "ModelSpec", "build_model", "build_run_model", *_LAZY]
