"""FedHERO's run options (``fedhero.*``) and their validation (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass

from fgl_flower.config import MethodOptions, RunConfig
from fgl_flower.errors import ConfigError

#: Similarity of the structure learner (spec §2.1 Eq. 3 and Table 4's variants).
METRICS = ("weighted-cos", "cos", "att", "gat")
#: What the clients federate (spec Table 5): the global channel (FedHERO), nothing, every
#: parameter, or the task model without the structure learner.
SHARING = ("global", "none", "all", "gcn")
#: Normalisation of the latent-graph regulariser (spec §2.5, A6).
REG_NORMS = ("n2", "none")


@dataclass(frozen=True)
class FedHEROOptions(MethodOptions):
    """FedHERO hyperparameters (spec §4); ``hidden``, ``num-layers`` (L) and ``dropout``
    are the run's."""

    alpha: float = 0.2  # weight of the local channel (original graph) in each layer's mix
    k: int = 20  # neighbours kept per node in the latent graph
    heads: int = 4  # N_H heads of the similarity
    lam: float = 0.1  # lambda: feature smoothness of the latent graph
    mu: float = 0.1  # mu: squared Frobenius norm of the latent graph
    reg_norm: str = "n2"  # n2: divide both terms by N^2 (IDGL/GraphGLOW) | none: as printed
    metric: str = "weighted-cos"
    share: str = "global"
    share_f0: bool = False  # also federate the feature projection f_0 (spec A5)
    dual_channel: bool = True  # false: one set of layer weights on both graphs ("w/o DC")
    max_nodes: int = 20000  # refuse clients above this size (the similarity is O(N^2))


def shared_prefixes(o: FedHEROOptions) -> tuple[str, ...] | None:
    """Parameter prefixes a client uploads for ``o.share`` (``None``: every parameter)."""
    if o.share == "all":
        return None
    prefixes = {"global": ("struct.", "gconv."), "none": (),
                "gcn": ("proj.", "gconv.", "lconv.", "cls.")}[o.share]
    if o.share_f0 and "proj." not in prefixes:
        prefixes = ("proj.", *prefixes)
    return prefixes


def check_config(cfg: RunConfig) -> None:
    """Reject settings FedHERO cannot run before anything starts."""
    o = FedHEROOptions.from_config(cfg)
    o.require_at_least_one("fedhero", "k", "heads", "max_nodes")
    for name, value, allowed in (("metric", o.metric, METRICS), ("share", o.share, SHARING),
                                 ("reg-norm", o.reg_norm, REG_NORMS)):
        if value not in allowed:
            raise ConfigError(f"fedhero.{name}={value!r}: use one of {', '.join(allowed)}.")
    if not 0.0 <= o.alpha <= 1.0:
        raise ConfigError(f"fedhero.alpha={o.alpha} must be in [0, 1] (the local channel's weight).")
    if o.lam < 0 or o.mu < 0:
        raise ConfigError("fedhero.lam and fedhero.mu must be non-negative.")
    if cfg.num_layers < 1:
        raise ConfigError("FedHERO needs num-layers >= 1 (the paper uses 2).")
    if o.share_f0 and o.share in ("all", "none"):
        raise ConfigError(f"fedhero.share-f0 adds the feature projection to the shared channel; "
                          f"with share={o.share!r} it has no effect: leave it false.")
