r"""The representation :math:`z` a model's output layer reads, from the same forward pass as
its outputs: what representation-level methods (MOON's contrast, FedProto's prototypes)
work on. A node backbone with a hidden layer exposes it as ``embed(x, edge_index) -> [N, h]``
(:attr:`~fgl_flower.models.registry.ModelSpec.hidden`); GIN as the input of its ``readout``
(the pooled graph representation, ``[B, h]``).
"""

from __future__ import annotations

from torch import Tensor, nn

from fgl_flower.errors import FGLError


class Removable:
    """A handle whose ``remove()`` undoes a watch (as a torch hook's)."""

    def __init__(self, undo) -> None:
        self.remove = undo


def watch_representation(model: nn.Module, sink) -> Removable:
    """Call ``sink(z)`` with the representation :math:`z` every forward pass of ``model``
    computes: a node backbone's ``embed(x, edge_index)`` output (the input of its last layer,
    wrapped on the instance), or the input of GIN's ``readout``."""
    embed = getattr(model, "embed", None)
    if callable(embed):

        def watched(*args, **kwargs):
            z = embed(*args, **kwargs)
            sink(z)
            return z

        model.embed = watched
        return Removable(lambda: model.__dict__.pop("embed", None))
    readout = getattr(model, "readout", None)
    if isinstance(readout, nn.Module):
        return readout.register_forward_pre_hook(lambda _, a: sink(a[0]))
    raise FGLError(
        f"this method needs a backbone whose representation feeds its output layer; "
        f"{type(model).__name__} has none (use gcn, graphsage, gat, mlp, acmgcn or gin)."
    )


def representation(model: nn.Module, args: tuple) -> Tensor:
    """:math:`z` of ``model`` on its forward inputs ``args``."""
    seen: list[Tensor] = []
    handle = watch_representation(model, seen.append)
    try:
        model(*args)
    finally:
        handle.remove()
    return seen[-1]
