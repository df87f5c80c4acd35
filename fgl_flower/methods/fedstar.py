"""FedStar's run checks (torch-free): it has no options of its own (``hidden``,
``num-layers`` and ``dropout`` size both channels)."""

from __future__ import annotations

from fgl_flower.config import RunConfig
from fgl_flower.errors import ConfigError


def check_feature_channel(cfg: RunConfig) -> None:
    """FedStar's and FedDense's feature channel is a GIN: on graph tasks ``model`` must say
    so (no node backbone is named ``gin``; on node tasks ``model`` is not used)."""
    from fgl_flower.datasets.resolve import task_of

    if cfg.model != "gin" and task_of(cfg.dataset) == "graph":
        raise ConfigError(f"{cfg.method} builds its own dual-channel model whose feature channel "
                          f"is a GIN; model={cfg.model!r} cannot be used: set model=gin.")


check_config = check_feature_channel
