"""FedGL's spec (torch-free): FedAvg plus global pseudo-labels fused from the clients'
predictions, and a global pseudo-graph over their fused node embeddings."""

from __future__ import annotations

from dataclasses import dataclass

from fgl_flower.config import MethodOptions, RunConfig
from fgl_flower.methods.spec import MethodSpec
from fgl_flower.probes import Probe

#: Client -> server: ``probs [n, C]`` (eval-mode softmax of every local node after training),
#: ``embeddings [n, C]`` (the same forward pass's logits: the node embeddings of the
#: pseudo-graph, as OpenFGL's) and ``nodes [n]`` (their global ids).
PREDICTIONS = "fedgl.predictions"
#: Server -> client: ``labels [n]`` (the global pseudo-label of each of the client's nodes,
#: in its node order; -1: none); absent before the first fusion.
PSEUDO = "fedgl.pseudo"
#: Server -> client (train and evaluate messages, with ``fedgl.graph-weight > 0``): the
#: pseudo-graph's block among the client's nodes, ``edges [2, E]`` (source, target: positions
#: in the client's node order) and ``weight [E]`` (already times ``graph-weight``), which the
#: client adds to its own edges (weight 1); absent before the first fusion.
GRAPH = "fedgl.graph"

#: Backbones whose forward pass uses ``edge_weight`` (the pseudo-graph's edges are weighted):
#: GraphSAGE and GAT ignore edge weights, an MLP ignores edges.
WEIGHTED_MODELS = ("gcn", "gcn-concat", "sgc", "acmgcn", "acm-gcn")

#: How the server weighs each client's predictions in the fusion: ``sampling-rate`` (its
#: aggregation weight, OpenFGL's default) or ``mean`` (equally).
PRED_WEIGHTS = ("sampling-rate", "mean")

PROBES = (
    Probe(
        "fedgl.pseudo-share",
        "share of the client's non-training nodes that carry a global pseudo-label (from round 2)",
        dead_below=1e-3,
        why="No node gets a pseudo-label: FedGL is FedAvg.",
    ),
    Probe(
        "fedgl.ssl-share",
        "w l_ssl / (l_ce + w l_ssl), the pseudo-label loss's share, mean over the round's steps",
        dead_below=1e-4,
        why="The pseudo-labels do not enter the local loss.",
    ),
    Probe(
        "fedgl.agreement",
        "share of the pseudo-labelled non-training nodes whose pseudo-label is the received "
        "global model's own prediction (1: the fusion adds nothing the global model lacks)",
    ),
    Probe(
        "fedgl.graph-edges",
        "pseudo-graph edges among the client's nodes per local edge it trains with (from round "
        "2, with graph-weight > 0)",
        dead_below=1e-3,
        why="The pseudo-graph adds no edge inside the client: FedGL's second half is off.",
    ),
    Probe(
        "fedgl.graph-mass",
        "the pseudo-graph block's total weight per local edge (weight 1 each): how much of "
        "the adjacency the pseudo-graph contributes",
    ),
)


@dataclass(frozen=True)
class FedGLOptions(MethodOptions):
    """FedGL's hyperparameters (Chen, Hu, Xu and Zheng, Information Sciences 2024; arXiv
    2105.03170): OpenFGL's defaults (the paper's text was not available offline), so the
    pseudo-graph is off (``graph_weight`` 0) unless asked for."""

    ssl_weight: float = 0.1
    threshold: float = 0.5
    pred_weight: str = "sampling-rate"
    graph_weight: float = 0.0
    k: int = 100


def check_config(cfg: RunConfig) -> None:
    o = FedGLOptions.from_config(cfg)
    o.require_choice("fedgl", "pred_weight", PRED_WEIGHTS)
    o.require_nonnegative("fedgl", "ssl_weight", "graph_weight")
    o.require_at_least_one("fedgl", "k")
    if o.graph_weight > 0 and cfg.model not in WEIGHTED_MODELS:
        from fgl_flower.errors import ConfigError

        raise ConfigError(
            f"fedgl.graph-weight={o.graph_weight}: the pseudo-graph's edges are weighted and "
            f"model={cfg.model!r} ignores edge weights; use one of {', '.join(WEIGHTED_MODELS)}"
            " or leave fedgl.graph-weight=0."
        )
    if not 0 <= o.threshold < 1:
        from fgl_flower.errors import ConfigError

        raise ConfigError(f"fedgl.threshold={o.threshold} must be in [0, 1).")


SPEC = MethodSpec(
    name="fedgl",
    strategy="fgl_flower.strategies.fedgl:FedGLStrategy",
    client="fgl_flower.clients.fedgl:FedGLClient",
    space={"ssl-weight": "0.01..1:log", "threshold": "0.3..0.9"},
    tasks=("node",),
    summary="FedAvg plus global pseudo-labels: the server fuses the clients' confident "
    "predictions per global node and sends each client labels for its unlabelled nodes; with "
    "graph-weight > 0 also a top-k pseudo-graph over the fused embeddings, added to each "
    "client's edges.",
    reference="Chen et al., Information Sciences 2024",
    options=FedGLOptions.defaults(),
    option_help={
        "ssl-weight": "weight of the pseudo-label cross-entropy",
        "threshold": "a client's class probability below this adds nothing to the fusion",
        "pred-weight": "sampling-rate (each client's aggregation weight) | mean",
        "graph-weight": "weight of the global pseudo-graph added to each client's edges "
        "(0: off, OpenFGL's default)",
        "k": "neighbours each node keeps in the pseudo-graph (top-k dot products)",
    },
    check=check_config,
    probes=PROBES,
)
