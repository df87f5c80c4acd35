"""FedHERO's run options (``fedhero.*``) and their validation (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass

from fgl_flower.config import MethodOptions, RunConfig
from fgl_flower.errors import ConfigError
from fgl_flower.methods.spec import MethodSpec
from fgl_flower.probes import Probe

#: Similarity of the structure learner (spec §2.1 Eq. 3 and Table 4's variants).
METRICS = ("weighted-cos", "cos", "att", "gat")
#: What the clients federate (spec Table 5): the global channel (FedHERO), nothing, every
#: parameter, or the task model without the structure learner.
SHARING = ("global", "none", "all", "gcn")
#: Normalisation of the latent-graph regulariser (spec §2.5, A6).
REG_NORMS = ("n2", "none")
#: What a kept latent entry weighs (models/fedhero.py): Eq. 4's 1 with a straight-through
#: gradient, or the ReLU'd similarity (spec A1/A3, superseded: the graph empties).
LATENT_GRAPHS = ("binary", "weighted")
#: The structure learner's encoder output (Eq. 3's input): the GCN layer's linear output (the
#: paper names only "a one-layer GNN") or ReLU'd (spec A4: its units die over the rounds until
#: every similarity is equal and the latent graph is arbitrary).
STRUCT_ACTIVATIONS = ("none", "relu")


#: The latent graph's health, measured on each client's evaluation forward every round
#: (:meth:`fgl_flower.models.fedhero.LatentGraph.health`).
PROBES = (
    Probe(
        "latent.nonempty",
        "share of nodes with a non-empty latent row",
        dead_below=0.5,
        why="The latent graph is empty: the global channel carries only its biases.",
    ),
    Probe(
        "latent.contrast",
        "kept minus mean similarity of a row, mean over rows",
        dead_below=0.01,
        why="The kept similarities are no higher than the rest: the top-k picks arbitrarily.",
    ),
    Probe("latent.weight", "mean kept weight"),
    Probe("latent.similarity", "mean kept similarity"),
    Probe("latent.edges", "latent node pairs per node"),
    Probe("latent.targets", "share of nodes some other node keeps"),
    Probe("latent.hubs", "share of kept entries pointing at the most-kept 1 % of nodes"),
    Probe(
        "latent.dead_units",
        "share of the structure learner's embedding units that are 0 for every node",
    ),
    Probe("latent.rank", "effective rank of the structure learner's node embeddings S"),
    Probe("latent.reg", "the regulariser L_smooth (Eq. 7) on the evaluation's latent graph"),
    Probe("latent.homophily", "same-label share of latent pairs of training nodes"),
)


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
    latent: str = (
        "binary"  # binary: Eq. 4's 0/1 kNN graph (straight-through) | weighted: ReLU'd values
    )
    reg_surrogate: bool = False  # binary: also pass the regulariser's gradient straight through
    struct_act: str = (
        "none"  # the structure learner's encoder output: none (linear) | relu (spec A4)
    )
    share: str = "global"
    share_f0: bool = False  # also federate the feature projection f_0 (spec A5)
    dual_channel: bool = True  # false: one set of layer weights on both graphs ("w/o DC")
    max_nodes: int = 20000  # refuse clients above this size (the similarity is O(N^2))


def shared_prefixes(o: FedHEROOptions) -> tuple[str, ...] | None:
    """Parameter prefixes a client uploads for ``o.share`` (``None``: every parameter)."""
    if o.share == "all":
        return None
    prefixes = {
        "global": ("struct.", "gconv."),
        "none": (),
        "gcn": ("proj.", "gconv.", "lconv.", "cls."),
    }[o.share]
    if o.share_f0 and "proj." not in prefixes:
        prefixes = ("proj.", *prefixes)
    return prefixes


def check_config(cfg: RunConfig) -> None:
    """Reject settings FedHERO cannot run before anything starts."""
    o = FedHEROOptions.from_config(cfg)
    o.require_at_least_one("fedhero", "k", "heads", "max_nodes")
    for name, allowed in (
        ("metric", METRICS),
        ("share", SHARING),
        ("reg_norm", REG_NORMS),
        ("latent", LATENT_GRAPHS),
        ("struct_act", STRUCT_ACTIVATIONS),
    ):
        o.require_choice("fedhero", name, allowed)
    if not 0.0 <= o.alpha <= 1.0:
        raise ConfigError(
            f"fedhero.alpha={o.alpha} must be in [0, 1] (the local channel's weight)."
        )
    if o.lam < 0 or o.mu < 0:
        raise ConfigError("fedhero.lam and fedhero.mu must be non-negative.")
    if o.reg_surrogate and o.latent != "binary":
        raise ConfigError(
            'fedhero.reg-surrogate applies to latent="binary" (the weighted graph\'s '
            "regulariser has its own gradient): leave it false."
        )
    if cfg.num_layers < 1:
        raise ConfigError("FedHERO needs num-layers >= 1 (the paper uses 2).")
    if o.share_f0 and o.share in ("all", "none"):
        raise ConfigError(
            f"fedhero.share-f0 adds the feature projection to the shared channel; "
            f"with share={o.share!r} it has no effect: leave it false."
        )


SPEC = MethodSpec(
    name="fedhero",
    strategy="fgl_flower.strategies.fedhero:FedHEROStrategy",
    client="fgl_flower.clients.fedhero:FedHEROClient",
    space={
        "alpha": "0.0..0.9",
        "k": "5..40",
        "lam": "0.01..1:log",
    },
    tasks=("node",),
    summary="Dual-channel GNN for heterophilic graphs: a latent kNN graph from a shared "
    "structure learner beside the original graph; only the latent-graph channel is shared.",
    reference="Chen et al., FedHERO, arXiv:2504.21206 (2025)",
    options=FedHEROOptions.defaults(),
    check=check_config,
    own_init=True,
    probes=PROBES,
    defaults={"lr": 0.005, "local-epochs": 1},
    robust_aggregation=True,
    config_note="node tasks; paper: lr 0.005, hidden 64, 2 layers, 1 step per round",
    option_help={
        "alpha": "weight of the local channel (original graph) in every layer's mix",
        "k": "neighbours kept per node in the latent graph",
        "heads": "N_H heads of the similarity",
        "lam": "lambda: feature smoothness of the latent graph",
        "mu": "mu: squared Frobenius norm of the latent graph",
        "reg-norm": "n2: both terms / N^2 (IDGL, GraphGLOW) | none: as printed in the paper",
        "metric": "weighted-cos (Eq. 3) | cos | att | gat (Table 4)",
        "latent": "binary: Eq. 4's 0/1 kNN graph, straight-through gradient | weighted: ReLU'd similarities (empties)",
        "reg-surrogate": "binary: also pass the regulariser's gradient straight through (drives similarities to -1)",
        "struct-act": "the structure learner's encoder output: none (linear GCN layer) | relu (spec A4; its units die, the graph collapses)",
        "share": "global (struct+gconv) | none | all | gcn (all but the structure learner)",
        "share-f0": "also share the feature projection f_0",
        "dual-channel": 'false: the same layer weights on both graphs ("w/o DC")',
        "max-nodes": "refuse clients above this size (the similarity costs O(N^2))",
    },
)
