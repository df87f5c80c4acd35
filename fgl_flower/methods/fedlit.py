"""FedLit's run options (``fedlit.*``), probes and validation (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass

from fgl_flower.config import MethodOptions, RunConfig
from fgl_flower.errors import ConfigError
from fgl_flower.methods.spec import MethodSpec
from fgl_flower.probes import Probe

#: How the server's grouping of the clients' link types reaches them. ``matched``: each client's
#: type ``k`` joins the global type whose centre its centroid matched, and receives that type's
#: channel and centre (what the official code's names and comments describe). ``official``: as
#: the official code runs, where the match is stored with its two indices swapped (centre for
#: type) and every client downloads the alignment of the last client in the grouping (its loop
#: over all clients' groups overwrites the branches).
ALIGNMENTS = ("matched", "official")
#: Reply record of a client's centroids and per-type training-node counts.
CENTROIDS = "fedlit.centroids"

PROBES = (
    Probe(
        "fedlit.type-entropy",
        "entropy of the client's shares of edges per link type, over "
        "log K (0: every edge one type, 1: all types alike), at evaluation",
        dead_below=0.05,
        why="every edge has one link type: the K channels are one GCN",
    ),
    Probe(
        "fedlit.types-used", "link types holding at least 1 % of the client's edges, at evaluation"
    ),
    Probe(
        "fedlit.reassigned", "share of the client's edges whose link type changed over its round"
    ),
    Probe(
        "fedlit.center-cos",
        "mean cosine between a client's centroid and the global centre it matched (server)",
    ),
    Probe(
        "fedlit.permuted",
        "share of the round's clients whose types map to the global types "
        "in another order (server)",
    ),
)


@dataclass(frozen=True)
class FedLitOptions(MethodOptions):
    """FedLit's hyperparameters (the official ``run_FedLIT_trainer.sh``)."""

    num_types: int = 4  # K: latent link types, one GCN channel each (nlinktype)
    em_iters: int = 1  # assignment/mean iterations per local epoch (num_iterEM)
    alignment: str = "matched"  # matched | official (see ALIGNMENTS)


def check_config(cfg: RunConfig) -> None:
    o = FedLitOptions.from_config(cfg)
    o.require_at_least_one("fedlit", "num_types", "em_iters")
    o.require_choice("fedlit", "alignment", ALIGNMENTS)
    if cfg.model != "gcn":
        raise ConfigError(
            f"FedLit trains its own multi-channel GCN (models/fedlit.py: a shared "
            f"projection, fedlit.num-types GCN channels of num-layers layers, a "
            f"classifier): leave model=gcn (got model={cfg.model!r})."
        )


SPEC = MethodSpec(
    name="fedlit",
    strategy="fgl_flower.strategies.fedlit:FedLitStrategy",
    client="fgl_flower.clients.fedlit:FedLitClient",
    space={
        "num-types": "2..8",
    },
    tasks=("node",),
    summary="Latent link types found by clustering the edges (E-M on their embeddings), one "
    "GCN channel per type; the server aligns the clients' types and averages each type's channel.",
    reference="Xie, Xiong and Yang, FedLit, WWW 2023",
    options=FedLitOptions.defaults(),
    check=check_config,
    probes=PROBES,
    config_note="node tasks; the official script: lr 0.01, weight-decay 5e-4, dropout 0.5, hidden 64, 2 layers, 1 epoch a round",
    option_help={
        "num-types": "K latent link types, one GCN channel each",
        "em-iters": "assignment/mean iterations of the edge clustering per local epoch",
        "alignment": "matched (a client's type gets the channel of the global type it matched) | official (the code's swapped indices, the last client's alignment for all)",
    },
)
