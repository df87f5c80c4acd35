"""GCFL's run options (``gcfl.*``), probes and validation (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass

from fgl_flower.config import MethodOptions, RunConfig
from fgl_flower.errors import ConfigError
from fgl_flower.methods.spec import MethodSpec
from fgl_flower.probes import Probe

#: GCFL (split by the cosine similarities of the updates) or GCFL+ (by the DTW distances
#: of the clients' sequences of gradient norms).
VARIANTS = ("gcfl", "gcfl+")
#: What GCFL+ records per client each round: the norm of the gradient of the shared
#: parameters at the last local step (the GCFL code's ``run_gcflplus``) or of the client's
#: update ``dW`` (its ``run_gcflplus_dWs``).
SEQUENCES = ("grad", "update")
#: Train-reply metric in which a GCFL+ client reports its last local gradient's norm.
GRAD_NORM = "gcfl.grad-norm"

#: The number of clusters after each round's aggregation (no dead bound: one cluster is
#: legitimate until the split rule fires).
PROBES = (Probe("clusters", "number of client clusters"),)


@dataclass(frozen=True)
class GCFLOptions(MethodOptions):
    """GCFL's split criterion (spec §10; FedDense's values on graph tasks; the GCFL code's
    defaults are eps1 0.05 with one dataset, 0.01 with several, and eps2 0.1; its
    ``runnerfile`` uses eps1 0.025-0.08 and eps2 0.045-0.4) and GCFL+'s sequences. Node tasks read ``eps1_node``/``eps2_node``
    (measured on FedHERO's Table 3 setting, docs/methods/gcfl.md)."""

    variant: str = (
        "gcfl"  # gcfl: min cut of update similarities | gcfl+: of gradient-norm sequences (DTW)
    )
    eps1: float = 0.05  # graph tasks: split when the cluster's mean update norm is below this ...
    eps2: float = 0.1  # ... and its largest client update norm above this
    eps1_node: float = 0.2  # node tasks: the same two thresholds (docs/methods/gcfl.md)
    eps2_node: float = 0.4
    split_after: int = 20  # ... and the round is later than this
    min_split_size: int = 3  # ... and the cluster has at least this many clients
    seq_length: int = 5  # GCFL+: ... and every client of it has this many sequence entries
    sequence: str = "grad"  # GCFL+: grad (last local gradient's norm) | update (norm of dW)
    standardize: bool = False  # GCFL+: divide each sequence by its std before the DTW

    def thresholds(self, task: str) -> tuple[float, float]:
        """``(eps1, eps2)`` of a ``"node"`` or ``"graph"`` task."""
        return (self.eps1_node, self.eps2_node) if task == "node" else (self.eps1, self.eps2)


def run_level(cfg: RunConfig) -> str:
    """``"node"`` or ``"graph"``: the level of the run's data (dataset groups: graph)."""
    from fgl_flower.datasets.resolve import level_of

    return level_of(cfg.dataset)


def check_config(cfg: RunConfig) -> None:
    o = GCFLOptions.from_config(cfg)
    o.require_choice("gcfl", "variant", VARIANTS)
    o.require_choice("gcfl", "sequence", SEQUENCES)
    for name in ("eps1", "eps2", "eps1_node", "eps2_node"):
        if not getattr(o, name) >= 0:  # NaN too
            raise ConfigError(
                f"gcfl.{name.replace('_', '-')}={getattr(o, name)} must be non-negative "
                "(a threshold on update norms)."
            )
    if o.split_after < 1:
        raise ConfigError(
            f"gcfl.split-after must be at least 1 (got {o.split_after}): a client's "
            "update is known from round 2 on, once the server holds its cluster's model."
        )
    if o.min_split_size < 2:
        raise ConfigError(f"gcfl.min-split-size must be at least 2 (got {o.min_split_size}).")
    task = run_level(cfg)
    unused = ("eps1", "eps2") if task == "node" else ("eps1_node", "eps2_node")
    if set_here := [n for n in unused if getattr(o, n) != getattr(GCFLOptions, n)]:
        used = "eps1-node/eps2-node" if task == "node" else "eps1/eps2"
        other = "graph" if task == "node" else "node"
        raise ConfigError(
            f"{', '.join('gcfl.' + n.replace('_', '-') for n in set_here)}: for {other}-level "
            f"datasets only; {cfg.dataset!r} is {task}-level, and its split rule reads "
            f"gcfl.{used}: set those instead."
        )
    if o.seq_length < 1:
        raise ConfigError(
            f"gcfl.seq-length must be at least 1 (got {o.seq_length}): GCFL+ compares "
            "the last seq-length entries of the clients' gradient-norm sequences."
        )


SPEC = MethodSpec(
    name="gcfl",
    strategy="fgl_flower.strategies.gcfl:GCFLStrategy",
    client="fgl_flower.clients.gcfl:GCFLClient",
    space={  # each data level's split thresholds
        "node:eps1-node": "0.05..0.5:log",
        "node:eps2-node": "0.1..1:log",
        "graph:eps1": "0.01..0.2:log",
        "graph:eps2": "0.05..0.5:log",
    },
    tasks=("node", "graph", "graph-regression"),
    summary="Clustered FedAvg: clusters split by a min cut of the clients' update "
    "similarities when their updates cancel out.",
    reference="Xie et al., NeurIPS 2021",
    options=GCFLOptions.defaults(),
    check=check_config,
    probes=PROBES,
    config_note="GCFL's split rule (spec feddense.md §10); any task",
    option_help={
        "variant": "gcfl: min cut of the updates' cosines | gcfl+: of DTW distances of gradient-norm sequences",
        "eps1": "graph tasks: split a cluster when the norm of its clients' mean update is below this",
        "eps2": "... and its largest client update norm is above this",
        "eps1-node": "node tasks: eps1 instead (measured, docs/methods/gcfl.md: 0.05 never fires there)",
        "eps2-node": "node tasks: eps2 instead",
        "split-after": "... and the round is later than this (>= 1)",
        "min-split-size": "... and it has at least this many clients",
        "seq-length": "gcfl+: ... and each of them has this many sequence entries since the last split",
        "sequence": "gcfl+: per round the norm of the last local gradient (grad) or of the update (update)",
        "standardize": "gcfl+: divide each sequence by its std before the DTW (compare trends)",
    },
)
