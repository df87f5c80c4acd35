"""GCFL's run options (``gcfl.*``) and their validation (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass

from fgl_flower.config import MethodOptions, RunConfig
from fgl_flower.errors import ConfigError


@dataclass(frozen=True)
class GCFLOptions(MethodOptions):
    """GCFL's split criterion (spec §10; FedDense's values, the GCFL code's eps1 is 0.01)."""

    eps1: float = 0.05  # split when the cluster's mean update norm is below this ...
    eps2: float = 0.1  # ... and its largest client update norm above this
    split_after: int = 20  # ... and the round is later than this
    min_split_size: int = 3  # ... and the cluster has at least this many clients


def check_config(cfg: RunConfig) -> None:
    o = GCFLOptions.from_config(cfg)
    if o.eps1 < 0 or o.eps2 < 0:
        raise ConfigError("gcfl.eps1 and gcfl.eps2 must be non-negative.")
    if o.split_after < 1:
        raise ConfigError(f"gcfl.split-after must be at least 1 (got {o.split_after}): a client's "
                          "update is known from round 2 on, once the server holds its cluster's model.")
    if o.min_split_size < 2:
        raise ConfigError(f"gcfl.min-split-size must be at least 2 (got {o.min_split_size}).")
