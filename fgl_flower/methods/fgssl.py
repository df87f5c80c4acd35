"""FGSSL's run options (``fgssl.*``), probes and validation (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass

from fgl_flower.config import MethodOptions, RunConfig
from fgl_flower.errors import ConfigError
from fgl_flower.methods.spec import MethodSpec
from fgl_flower.probes import Probe

#: What the local loss adds to the cross-entropy (docs/methods/fgssl.md):
#: ``paper``: the paper's two terms, the semantic contrast of the local model's strong view
#: with the global model's weak view (FNSC) and the neighbour-similarity distillation from
#: the global model (FGSD); ``code``: what the official code trains, a contrast of the local
#: model's strong view with its own weak view (the global model has no effect);
#: ``openfgl``: what OpenFGL trains, an edge-difference distillation from the global model.
VARIANTS = ("paper", "code", "openfgl")

#: Measured by each client on the round's last local step (gradients, so a term whose value
#: is there but whose gradient is cut reads 0).
PROBES = (
    Probe(
        "fgssl.contrast-grad",
        "||grad of the weighted contrast|| / ||grad of the cross-entropy|| "
        "(0 under variant=openfgl, which trains no contrast)",
        dead_below=1e-3,
        why="The semantic contrast does not move the local model.",
    ),
    Probe(
        "fgssl.structure-grad",
        "||grad of the weighted structure distillation|| / ||grad of the "
        "cross-entropy|| (0 under variant=code, which trains none)",
        dead_below=1e-4,
        why="The structure distillation does not move the local model.",
    ),
    Probe(
        "fgssl.teacher-effect",
        "||grad aux(global model) - grad aux(local model in its place)|| / "
        "||grad aux||, on the same views: what the global model changes in the update",
        dead_below=1e-3,
        why="The global model does not change the local update: FGSSL is FedAvg with a local "
        "regulariser (variant=code trains so).",
    ),
    Probe(
        "fgssl.class-margin",
        "after training: mean cosine of a training node's representation "
        "with the global model's of other nodes of its class minus that with other classes",
    ),
)


@dataclass(frozen=True)
class FGSSLOptions(MethodOptions):
    """FGSSL's hyperparameters. The paper's text was not available offline; weights and
    temperatures are the official code's where it has them (contrast), else ours (structure),
    and are listed on docs/methods/fgssl.md."""

    variant: str = "paper"
    contrast_weight: float = 1.5  # the official code's effective weight of its contrast (3 x 0.5)
    tau: float = 0.1  # contrast temperature (both codes)
    structure_weight: float = 1.0  # FGSD's weight (not in either code; ours)
    omega: float = 0.1  # FGSD's temperature over the neighbour similarities (ours)
    openfgl_weight: float = 0.1  # variant=openfgl: the edge-difference term's weight
    openfgl_tau: float = 0.1  # ... and its temperature
    weak_edges: float = 0.3  # weak view: share of edges dropped
    weak_features: float = 0.3  # ... and of feature columns masked
    strong_edges: float = 0.8  # strong view
    strong_features: float = 0.5


def check_config(cfg: RunConfig) -> None:
    """Reject settings FGSSL cannot run before anything starts."""
    from fgl_flower.models.registry import MODELS

    o = FGSSLOptions.from_config(cfg)
    o.require_choice("fgssl", "variant", VARIANTS)
    if not MODELS.get(cfg.model).hidden or cfg.num_layers < 2:
        raise ConfigError(
            f"fgssl compares node representations before the last layer; model={cfg.model!r} with "
            f"num-layers={cfg.num_layers} has none. Use a backbone with a hidden layer (gcn, "
            f"graphsage, gat, mlp, acmgcn) and num-layers >= 2."
        )
    o.require_nonnegative("fgssl", "contrast_weight", "structure_weight", "openfgl_weight")
    o.require_positive("fgssl", "tau", "omega", "openfgl_tau")
    for name in ("weak_edges", "weak_features", "strong_edges", "strong_features"):
        value = getattr(o, name)
        if not 0 <= value < 1:
            raise ConfigError(f"fgssl.{name.replace('_', '-')}={value} must be in [0, 1).")


SPEC = MethodSpec(
    name="fgssl",
    strategy="fgl_flower.strategies.fgssl:FGSSLStrategy",
    client="fgl_flower.clients.fgssl:FGSSLClient",
    space={
        "contrast-weight": "0.1..3:log",
        "tau": "0.05..1:log",
        "structure-weight": "0.1..3:log",
    },
    tasks=("node",),
    summary="FedAvg plus a node-level semantic contrast with the global model and a distillation "
    "of each node's neighbour-similarity distribution from it, on weak/strong graph views.",
    reference="Huang et al., FGSSL, IJCAI 2023",
    options=FGSSLOptions.defaults(),
    check=check_config,
    probes=PROBES,
    defaults={"num-rounds": 100},
    robust_aggregation=True,
    config_note="node tasks; the paper's text was not available: weights and temperatures from the official code (contrast) or ours (structure)",
    option_help={
        "variant": "paper: contrast + structure distillation with the global model; code: the official code's local two-view contrast; openfgl: OpenFGL's edge-difference distillation",
        "contrast-weight": "weight of the semantic contrast (the official code's 3 x its contrast's 0.5)",
        "tau": "contrast temperature (both codes)",
        "structure-weight": "weight of the neighbour-similarity distillation (ours)",
        "omega": "its temperature (ours)",
        "openfgl-weight": "variant=openfgl: weight of the edge-difference distillation",
        "openfgl-tau": "... and its temperature",
        "weak-edges": "weak view: share of edges dropped",
        "weak-features": "... and of feature columns masked",
        "strong-edges": "strong view: share of edges dropped",
        "strong-features": "... and of feature columns masked",
    },
    # the no-option demo (no dataset named): 10 of the protocol's 100 rounds
    demo={"num-rounds": 10},
)
