"""FED-PUB's run options (``fedpub.*``), probes and validation (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass

from fgl_flower.config import MethodOptions, RunConfig
from fgl_flower.errors import ConfigError
from fgl_flower.methods.spec import MethodSpec
from fgl_flower.probes import Probe

#: How the server turns functional-embedding similarities into aggregation weights: the
#: softmax ``exp(tau * S)`` row-normalised (the paper's and the code's default), or ``S``
#: itself row-normalised (the code's ``--agg-norm cosine``).
AGG_NORMS = ("exp", "cosine")
#: The local regularisers: with gradients, as the paper's objective reads (``paper``), or as
#: the official code computes them, on the detached copies ``state_dict()`` returns, which
#: add a constant to the loss and change no parameter (``code``).
REGULARIZERS = ("paper", "code")
#: What a client evaluates: the model it trained, in its train reply (the official client's
#: log), or the personalised model it receives next (O-pFGL's one-round protocol, where the
#: download is the last step).
EVALUATES = ("trained", "received")
#: The model the masks sit on: FED-PUB's own masked GCN (the paper's), or the run's ``model``
#: with a mask on every weight matrix (a table that runs every method on one backbone, as
#: S2FGL's on ACM-GCN).
BACKBONES = ("masked-gcn", "model")
#: Reply record that carries a client's functional embedding.
EMBEDDING = "fedpub.embedding"

#: Measured by the server on each round's personalisation weights, and by the clients on
#: their masks.
PROBES = (
    Probe(
        "fedpub.weight-spread",
        "largest minus smallest weight in a client's personalised "
        "average, mean over the clients that trained",
        dead_below=1e-3,
        why="Every client averages all models alike: FED-PUB is an unweighted FedAvg.",
    ),
    Probe("fedpub.self-weight", "mean weight of a client's own model in its personalised average"),
    Probe(
        "fedpub.similarity-spread",
        "largest minus smallest similarity of two clients' functional embeddings",
    ),
    Probe("fedpub.mask-pruned", "share of mask entries below fedpub.l1 (zeroed at evaluation)"),
)


@dataclass(frozen=True)
class FedPubOptions(MethodOptions):
    """FED-PUB's hyperparameters (the official code's defaults; ``norm-scale`` 3 as its
    Cora scripts run it, 10 in its parser)."""

    norm_scale: float = 3.0  # tau in exp(tau * cos(h_i, h_j))
    agg_norm: str = "exp"  # exp | cosine
    l1: float = 1e-3  # lambda_1: L1 of the masks; masks below it are zeroed at evaluation
    loc_l2: float = 1e-3  # lambda_2: proximity to the personalised model received
    regularizers: str = "paper"  # paper: with gradients | code: as the official code (no effect)
    proxy_graphs: int = 5  # random graphs of the proxy input
    proxy_nodes: int = 100  # nodes per proxy graph
    proxy_p: float = 0.1  # edge probability inside a proxy graph (none between them)
    mask_init: str = "ones"  # ones (the scripts' --laye/clsf-mask-one) | xavier
    evaluate: str = (
        "trained"  # trained (in the train reply) | received (the personalised model sent next)
    )
    backbone: str = "masked-gcn"  # masked-gcn (FED-PUB's own) | model (the run's model, masked)


MASK_INITS = ("ones", "xavier")


def check_config(cfg: RunConfig) -> None:
    from fgl_flower.models.registry import require_hidden

    o = FedPubOptions.from_config(cfg)
    o.require_choice("fedpub", "backbone", BACKBONES)
    if o.backbone == "masked-gcn" and (cfg.model != "gcn" or cfg.num_layers != 2):
        raise ConfigError(
            f"FED-PUB trains its own masked GCN (two GCN layers of `hidden` units and a "
            f"linear classifier, models/fedpub.py): leave model=gcn and num-layers=2 "
            f"(got model={cfg.model!r}, num-layers={cfg.num_layers}), or set "
            f"fedpub.backbone=model to put its masks on model={cfg.model!r}."
        )
    if o.backbone == "model":
        require_hidden(
            cfg.model,
            "fedpub",
            "with backbone=model reads its functional embedding from the "
            "backbone's node representations",
        )
    o.require_choice("fedpub", "agg_norm", AGG_NORMS)
    o.require_choice("fedpub", "regularizers", REGULARIZERS)
    o.require_choice("fedpub", "evaluate", EVALUATES)
    o.require_choice("fedpub", "mask_init", MASK_INITS)
    o.require_nonnegative("fedpub", "norm_scale", "l1", "loc_l2")
    o.require_at_least_one("fedpub", "proxy_graphs", "proxy_nodes")
    if not 0.0 < o.proxy_p <= 1.0:
        raise ConfigError(f"fedpub.proxy-p={o.proxy_p} must be in (0, 1]: an edge probability.")


SPEC = MethodSpec(
    name="fedpub",
    strategy="fgl_flower.strategies.fedpub:FedPubStrategy",
    client="fgl_flower.clients.fedpub:FedPubClient",
    space={
        "l1": "0.0001..0.01:log",
        "loc-l2": "0.0001..0.01:log",
        "norm-scale": "1..10",
    },
    tasks=("node",),
    summary="Personalised averages weighted by the similarity of the clients' functional "
    "embeddings on a random proxy graph; personalised sparse masks stay on the clients.",
    reference="Baek et al., FED-PUB, ICML 2023",
    options=FedPubOptions.defaults(),
    check=check_config,
    own_init=True,
    probes=PROBES,
    defaults={"num-rounds": 100, "hidden": 128, "weight-decay": 1e-6, "local-epochs": 1},
    config_note="node tasks; official code: hidden 128, lr 0.01, weight decay 1e-6, 1 epoch per round",
    option_help={
        "norm-scale": "tau in exp(tau * cos(h_i, h_j)) (the Cora scripts' value; parser default 10)",
        "agg-norm": "exp: softmax of tau * similarity | cosine: the similarities, row-normalised",
        "l1": "lambda_1: L1 of the masks; masks below it are zeroed at evaluation",
        "loc-l2": "lambda_2: proximity to the personalised weights received",
        "regularizers": "paper: with gradients | code: as the official code (detached: no effect)",
        "proxy-graphs": "random graphs in the proxy input",
        "proxy-nodes": "nodes per proxy graph",
        "proxy-p": "edge probability inside a proxy graph",
        "mask-init": "ones (the scripts' --laye-mask-one --clsf-mask-one) | xavier",
        "evaluate": "trained: the model each client trained (the code's log) | received: the personalised model it receives next (O-pFGL's one round)",
        "backbone": "masked-gcn: FED-PUB's own (model=gcn, num-layers=2) | model: masks on every weight matrix of the run's model (e.g. acmgcn)",
    },
    # the no-option demo (no dataset named): 10 of the protocol's 100 rounds
    demo={"num-rounds": 10},
)
