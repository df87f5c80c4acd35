"""S2FGL's run options (``s2fgl.*``) and their validation (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass

from fgl_flower.config import MethodOptions, RunConfig
from fgl_flower.errors import ConfigError
from fgl_flower.methods.spec import MethodSpec
from fgl_flower.probes import Probe

#: Eigensolvers of FGMA: exact dense ``eigh`` of the symmetrised Laplacian (spec §9
#: item 10, default) or ARPACK on the code's non-symmetric Laplacian (code-faithful).
EIG_MODES = ("dense-sym", "eigsh-asym")
#: How many eigenvectors a small FGMA graph of n nodes gets: ``half`` min(k, ⌊n/2⌋), so the
#: low and high sets are disjoint (default); ``code`` min(k, n - 1), what ARPACK allows the
#: official code (the sets overlap when n < 2k; Texas/Wisconsin clients).
EIG_CAPS = ("half", "code")

#: Record names of the S2FGL payloads (besides the model).
PROTOTYPES = "s2fgl.prototypes"  # client -> server: "prototypes" [C, d], "counts" [C]
REPOSITORY = "s2fgl.repository"  # server -> client: "anchors" [K*C, d]

#: Each auxiliary loss's share of the local loss, measured by each client during training
#: (:meth:`fgl_flower.clients.s2fgl.S2FGLClient.train`); 0 before ``start-round``, where the
#: strategy does not watch them (:meth:`fgl_flower.strategies.s2fgl.S2FGLStrategy.idle_probes`).
PROBES = (
    Probe(
        "nlir.share",
        "lambda1 L_FKD / L, mean over the round's local steps",
        dead_below=1e-4,
        why="NLIR adds nothing to the local loss: the round is FedAvg without the repository.",
    ),
    Probe(
        "fgma.share",
        "lambda2 L_FGMA / L, mean over the round's local steps",
        dead_below=1e-4,
        why="FGMA adds nothing to the local loss: no spectral alignment to the global model.",
    ),
)


@dataclass(frozen=True)
class S2FGLOptions(MethodOptions):
    """S2FGL hyperparameters (defaults: the official code's, spec §5)."""

    lambda1: float = 5.0  # NLIR (FKD) weight: the code's 100 * 0.05
    lambda2: float = 1.0  # FGMA weight
    start_round: int = 2  # first round with the auxiliary losses (needs the repository)
    ppr_alpha: float = 0.85
    proto_divisor: int = 3  # prototypes over the top floor(N/3) SALC nodes
    fgma_divisor: int = 5  # FGMA over the top floor(N/5) SALC nodes
    anchors: int = 4  # anchors per class in the repository
    anchor_fraction: float = 0.7  # clients per anchor: floor(0.7 M)
    temperature: float = 1.0
    knn: int = 3  # neighbours (besides self) of the FGMA feature graph
    eigvecs: int = 10  # low- and high-frequency eigenvectors each
    eig_mode: str = "dense-sym"
    eig_cap: str = "half"
    eval_dropout: bool = False  # the code's evaluation: dropout active (spec §9 item 14)
    shuffle_weights: bool = False  # the code's FedAvg weights permuted against models (item 13)


def check_config(cfg: RunConfig) -> None:
    """Reject settings S2FGL cannot run before anything starts."""
    from fgl_flower.models.registry import require_embeds

    o = S2FGLOptions.from_config(cfg)
    require_embeds(
        cfg.model, "s2fgl", "needs a backbone with node representations and a linear classifier"
    )
    if o.lambda1 < 0 or o.lambda2 < 0:
        raise ConfigError("s2fgl.lambda1 and s2fgl.lambda2 must be non-negative.")
    if o.start_round < 2:
        raise ConfigError(
            f"s2fgl.start-round must be at least 2: the repository exists only "
            f"after round 1 (got {o.start_round})."
        )
    o.require_at_least_one("s2fgl", "proto_divisor", "fgma_divisor", "anchors", "knn", "eigvecs")
    if not 0 < o.anchor_fraction <= 1 or not 0 < o.ppr_alpha < 1 or o.temperature <= 0:
        raise ConfigError(
            "s2fgl.anchor-fraction must be in (0, 1], ppr-alpha in (0, 1) and temperature positive."
        )
    o.require_choice("s2fgl", "eig_cap", EIG_CAPS)
    o.require_choice("s2fgl", "eig_mode", EIG_MODES)


SPEC = MethodSpec(
    name="s2fgl",
    strategy="fgl_flower.strategies.s2fgl:S2FGLStrategy",
    client="fgl_flower.clients.s2fgl:S2FGLClient",
    space={
        "lambda1": "0.1..10:log",
        "lambda2": "0.1..10:log",
    },
    tasks=("node",),
    summary="FedAvg with a SALC-prototype knowledge repository (NLIR distillation) and "
    "spectral alignment to the global model (FGMA).",
    reference="Tan et al., ICML 2025",
    options=S2FGLOptions.defaults(),
    check=check_config,
    probes=PROBES,
    defaults={"model": "acmgcn"},
    config_note='needs model = "acmgcn" (embed + classifier)',
    option_help={
        "lambda1": "NLIR (FKD) weight; the code's 100 * 0.05",
        "lambda2": "FGMA weight",
        "start-round": "first round with both extra losses (the repository exists from round 2)",
        "ppr-alpha": "PageRank alpha of SALC",
        "proto-divisor": "prototypes over the top floor(N/3) SALC-ranked (training) nodes",
        "fgma-divisor": "FGMA over the top floor(N/5) SALC-ranked nodes",
        "anchors": "repository anchors per class",
        "anchor-fraction": "each anchor averages floor(0.7 M) random clients",
        "temperature": "FKD softmax temperature",
        "knn": "FGMA kNN feature graph: neighbours besides self",
        "eigvecs": "FGMA low- and high-frequency eigenvectors (each)",
        "eig-mode": "dense-sym (exact eigh, symmetrised) | eigsh-asym (the code's ARPACK)",
        "eig-cap": "eigenvectors of an n-node FGMA graph: half (min(k, n/2), disjoint sets) | code (min(k, n-1), the code's)",
        "eval-dropout": "true: evaluate with dropout active, as the official code does",
        "shuffle-weights": "true: permute FedAvg weights against models each round (the code's bug)",
    },
)
