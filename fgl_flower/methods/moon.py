"""MOON's spec (torch-free): FedAvg with a model-contrastive term in the local loss."""

from __future__ import annotations

from dataclasses import dataclass

from fgl_flower.config import MethodOptions, RunConfig
from fgl_flower.errors import ConfigError
from fgl_flower.methods.spec import MethodSpec
from fgl_flower.probes import Probe

#: Which nodes the contrast covers on node tasks: ``train`` (the paper's mini-batch of
#: training examples) or ``all`` (every node of the client's subgraph, as OpenFGL does).
NODES = ("train", "all")

PROBES = (
    Probe(
        "moon.contrast-share",
        "mu l_con / (l_sup + mu l_con), mean over the round's local steps (0 where the client "
        "has no previous local model yet)",
        dead_below=1e-3,
        why="The model-contrastive term adds nothing to the local loss: MOON is FedAvg.",
    ),
    Probe(
        "moon.sim-gap",
        "mean over the contrasted examples of cos(z, z_glob) - cos(z, z_prev) after the "
        "round's last step: how much closer the local representation is to the global "
        "model's than to the previous local model's",
    ),
)


@dataclass(frozen=True)
class MoonOptions(MethodOptions):
    """MOON's hyperparameters (Li, He and Song, CVPR 2021): the contrast's weight ``mu``
    (the paper's 1 for CIFAR-100 and Tiny-ImageNet, 5 for CIFAR-10; OpenFGL's 1) and
    temperature ``tau`` (0.5 in the paper and OpenFGL)."""

    mu: float = 1.0
    tau: float = 0.5
    nodes: str = "train"


def check_config(cfg: RunConfig) -> None:
    """MOON contrasts the representation the output layer reads: a node backbone with a
    hidden layer, or GIN's pooled graph representation."""
    from fgl_flower.datasets.resolve import level_of
    from fgl_flower.models.registry import MODELS, model_for_task

    o = MoonOptions.from_config(cfg)
    o.require_choice("moon", "nodes", NODES)
    o.require_nonnegative("moon", "mu")
    o.require_positive("moon", "tau")
    level = level_of(cfg.dataset)
    model = model_for_task(cfg.model, level)
    if level == "node" and (not MODELS.get(model).hidden or cfg.num_layers < 2):
        raise ConfigError(
            f"moon contrasts the representations the output layer reads; model={model!r} with "
            f"num-layers={cfg.num_layers} has none. Use gcn, graphsage, gat, mlp or acmgcn with "
            "num-layers >= 2."
        )


SPEC = MethodSpec(
    name="moon",
    strategy="fgl_flower.strategies.moon:MoonStrategy",
    client="fgl_flower.clients.moon:MoonClient",
    space={"mu": "0.1..10:log", "tau": "0.1..1:log"},
    tasks=("node", "graph"),
    summary="FedAvg with a model-contrastive loss: each representation pulled towards the "
    "global model's and pushed from the previous local model's.",
    reference="Li, He and Song, CVPR 2021",
    options=MoonOptions.defaults(),
    option_help={
        "mu": "weight of the model-contrastive loss",
        "tau": "temperature of the contrast",
        "nodes": "node tasks: train (the training nodes, the paper's batch) | all (every node, OpenFGL's)",
    },
    check=check_config,
    probes=PROBES,
    robust_aggregation=True,
)
