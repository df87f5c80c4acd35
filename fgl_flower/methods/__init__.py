"""The method registry: a declarative table of every method of the package.

Adding a method = ``strategies/<m>.py`` + ``clients/<m>.py`` + one :class:`MethodSpec`
entry here (and its option defaults under ``[tool.flwr.app.config.<m>]`` in
``pyproject.toml``, which a contract test keeps in sync with ``options`` below). Options
that need more than a dict (types, validation) get a torch-free module
``methods/<m>.py``.

The table names strategies and clients as ``"module:Class"`` strings, imported on first
use: looking a method up, validating a config or loading the ClientApp imports no
method's code (nor torch), and a message imports only its own method.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING

from fgl_flower.config import RunConfig
from fgl_flower.dp.options import DP_OPTIONS
from fgl_flower.methods import (
    apfl, coboost, dense, fedfa, feddense, fedgta, fedhero, fedlit, fedlog, fednova, fedpub, fedsageplus, fedspray, fedstar, fedtad, fggp, fgssl, gcfl,
    opfgl, s2fgl,
)
from fgl_flower.probes import Probe
from fgl_flower.registry import Registry, import_object

if TYPE_CHECKING:
    from fgl_flower.clients.base import FGLClient
    from fgl_flower.strategies.base import FGLStrategy

Scalar = int | float | bool | str


@dataclass(frozen=True)
class MethodSpec:
    """One registered method.

    Attributes:
        name: Config/CLI name (``method=<name>``).
        strategy: Server half, a :class:`~fgl_flower.strategies.base.FGLStrategy`
            subclass or its ``"module:Class"`` path.
        client: Client half, a :class:`~fgl_flower.clients.base.FGLClient` subclass or
            its ``"module:Class"`` path.
        tasks: Tasks it supports (``"node"``, ``"graph"``).
        options: Method hyperparameters and their defaults (``<name>.<option>`` keys).
        summary: One line for docs and ``fgl methods``.
        reference: Paper it implements.
        check: Validates the method's options of a parsed config (raises
            :class:`~fgl_flower.errors.ConfigError`); run before anything starts.
        query_actions: The ``query.<action>`` messages its client answers (the ClientApp
            registers a handler for each).
        fixed_rounds: Rounds the protocol always has (one-shot: 1); ``fgl run`` uses it
            when no round count is given.
        defaults: Run-config values where the app's defaults (a node-level GCN demo on
            ``synthetic``) cannot run the method, e.g. its backbone or a graph-level
            dataset: ``fgl run`` and the Python API use them for keys the user did not
            give (``partition`` only together with ``dataset``), so that ``fgl run
            --method <name>`` alone runs a small demo.
        probes: The quantities that show its mechanism working (:mod:`fgl_flower.probes`),
            recorded every round; a run warns when one is dead.
        own_init: Its client builds its own model and initialises it as the method's code
            does, so the run's ``model-init`` does not reach it: a run that sets another
            ``model-init`` than ``default`` stops before training instead of ignoring it.
        robust_aggregation: Its server combines the uploads by FedAvg's
            :meth:`~fgl_flower.strategies.fedavg.FedAvgStrategy.average` and nothing else,
            so the run's ``aggregation`` rule (median, trimmed mean, Krum) replaces the mean.
    """

    name: str
    strategy: type[FGLStrategy] | str
    client: type[FGLClient] | str
    tasks: tuple[str, ...]
    summary: str
    reference: str = ""
    options: Mapping[str, Scalar] = field(default_factory=dict)
    check: Callable[[RunConfig], None] | None = None
    query_actions: tuple[str, ...] = ()
    fixed_rounds: int | None = None
    probes: tuple[Probe, ...] = ()
    defaults: Mapping[str, Scalar] = field(default_factory=dict)
    own_init: bool = False
    robust_aggregation: bool = False

    def option_defaults(self) -> dict[str, Scalar]:
        return dict(self.options)

    def strategy_class(self) -> type[FGLStrategy]:
        """The strategy class (imported now if registered by path)."""
        return import_object(self.strategy)

    def client_class(self) -> type[FGLClient]:
        """The client class (imported now if registered by path)."""
        return import_object(self.client)


METHODS: Registry[MethodSpec] = Registry("method")


def register_method(spec: MethodSpec, *, replace_existing: bool = False) -> MethodSpec:
    """Register ``spec`` with its options frozen (read-only mapping).

    Methods registered at run time (e.g. defined in a notebook, with classes rather than
    ``"module:Class"`` paths) run in-process; ``replace_existing`` re-registers a name (a
    notebook cell run twice)."""
    frozen = replace(spec, options=MappingProxyType(dict(spec.options)))
    METHODS.register(spec.name, frozen, replace=replace_existing)
    return frozen


def method_option_defaults() -> dict[str, Scalar]:
    """``<method>.<option>`` -> default of every registered method's options."""
    return {f"{name}.{k}": v for name, spec in METHODS.items() for k, v in spec.options.items()}


for _spec in (
    MethodSpec(
        name="local",
        strategy="fgl_flower.strategies.local:LocalStrategy",
        client="fgl_flower.clients.local:LocalClient",
        tasks=("node", "graph"),
        summary="Each client trains alone; nothing is averaged.",
    ),
    MethodSpec(
        name="fedavg",
        strategy="fgl_flower.strategies.fedavg:FedAvgStrategy",
        client="fgl_flower.clients.fedavg:FedAvgClient",
        tasks=("node", "graph"),
        summary="Average of the shared parameters weighted by training examples.",
        reference="McMahan et al., AISTATS 2017",
        options={"finetune-epochs": 0, "secure-aggregation": False, **DP_OPTIONS},
        robust_aggregation=True,
    ),
    MethodSpec(
        name="fedprox",
        strategy="fgl_flower.strategies.fedprox:FedProxStrategy",
        client="fgl_flower.clients.fedprox:FedProxClient",
        tasks=("node", "graph"),
        summary="FedAvg with a proximal term mu/2 ||w - w_global||^2 in the local loss.",
        reference="Li et al., MLSys 2020",
        options={"mu": 0.01, "finetune-epochs": 0, "secure-aggregation": False, **DP_OPTIONS},
        robust_aggregation=True,
    ),
    MethodSpec(
        name="apfl",
        strategy="fgl_flower.strategies.apfl:APFLStrategy",
        client="fgl_flower.clients.apfl:APFLClient",
        tasks=("node",),
        summary="Personalized: each client mixes a local model with its copy of the global one, "
        "alpha v + (1 - alpha) w, and learns alpha.",
        reference="Deng, Kamani and Mahdavi, arXiv 2003.13461 (2020)",
        options=apfl.APFLOptions.defaults(),
        check=apfl.check_config,
        probes=apfl.PROBES,
        robust_aggregation=True,
    ),
    MethodSpec(
        name="fednova",
        strategy="fgl_flower.strategies.fednova:FedNovaStrategy",
        client="fgl_flower.clients.fednova:FedNovaClient",
        tasks=("node", "graph"),
        summary="FedAvg with the normalized average: each update divided by the client's local "
        "steps, the sum scaled by their weighted mean.",
        reference="Wang et al., NeurIPS 2020",
        probes=fednova.PROBES,
    ),
    MethodSpec(
        name="fedfa",
        strategy="fgl_flower.strategies.fedfa:FedFAStrategy",
        client="fgl_flower.clients.fedfa:FedFAClient",
        tasks=("node",),
        summary="FedAvg with federated feature augmentation: the statistics of the classifier's "
        "input are perturbed with a variance fused from the batch and from all clients' statistics.",
        reference="Zhou and Konukoglu, FedFA, ICLR 2023",
        options=fedfa.FedFAOptions.defaults(),
        check=fedfa.check_config,
        probes=fedfa.PROBES,
        defaults={"model": "acmgcn"},
    ),
    MethodSpec(
        name="dense",
        strategy="fgl_flower.strategies.dense:DENSEStrategy",
        client="fgl_flower.clients.dense:DENSEClient",
        tasks=("node",),
        summary="One-shot: the clients' models up once; the server distils their ensemble into a "
        "fresh model on generated node features (kNN graph), clients fine-tune it.",
        reference="Zhang et al., DENSE, NeurIPS 2022",
        options=dense.DENSEOptions.defaults(),
        check=dense.check_config,
        probes=dense.PROBES,
        fixed_rounds=1,
    ),
    MethodSpec(
        name="coboost",
        strategy="fgl_flower.strategies.coboost:CoBoostStrategy",
        client="fgl_flower.clients.dense:DENSEClient",
        tasks=("node",),
        summary="One-shot: DENSE's distillation with hard-sample synthesis, an ensemble whose client "
        "weights are boosted on the synthetic data, and perturbed distillation.",
        reference="Dai et al., Co-Boosting, ICLR 2024",
        options=coboost.CoBoostOptions.defaults(),
        check=coboost.check_config,
        probes=coboost.PROBES,
        fixed_rounds=1,
    ),
    MethodSpec(
        name="fedspray",
        strategy="fgl_flower.strategies.fedspray:FedSprayStrategy",
        client="fgl_flower.clients.fedspray:FedSprayClient",
        tasks=("node",),
        summary="Personalized GNNs distilled from a global feature-structure encoder with "
        "class-wise structure proxies.",
        reference="Fu et al., KDD 2024",
        options={
            "variant": "official",
            "lambda1": -1.0,
            "lambda2": 1.0,
            "proxy-dim": 64,
            "proxy-lr": 0.02,
            "confidence": 0.7,
            "zero-proxies": False,
            **DP_OPTIONS,
        },
        check=fedspray.check_config,
        probes=fedspray.PROBES,
    ),
    MethodSpec(
        name="opfgl",
        strategy="fgl_flower.strategies.opfgl:OPFGLStrategy",
        client="fgl_flower.clients.opfgl:OPFGLClient",
        tasks=("node",),
        summary="One-shot: class statistics up, a condensed global pseudo-graph down, then "
        "local two-stage training with node-adaptive distillation.",
        reference="Yan et al., O-pFGL (one-shot personalized FGL)",
        options=opfgl.OPFGLOptions.defaults(),
        check=opfgl.check_config,
        probes=opfgl.PROBES,
        # the paper's backbone (spec §4.2): a GCN of width 64 without dropout; the splits and
        # the metric's weights stay the run's, so that methods run side by side share them
        defaults={"hidden": 64, "dropout": 0.0},
        fixed_rounds=1,
        query_actions=("stats",),
    ),
    MethodSpec(
        name="s2fgl",
        strategy="fgl_flower.strategies.s2fgl:S2FGLStrategy",
        client="fgl_flower.clients.s2fgl:S2FGLClient",
        tasks=("node",),
        summary="FedAvg with a SALC-prototype knowledge repository (NLIR distillation) and "
        "spectral alignment to the global model (FGMA).",
        reference="Tan et al., ICML 2025",
        options=s2fgl.S2FGLOptions.defaults(),
        check=s2fgl.check_config,
        probes=s2fgl.PROBES,
        defaults={"model": "acmgcn"},
    ),
    MethodSpec(
        name="fedstar",
        strategy="fgl_flower.strategies.fedstar:FedStarStrategy",
        client="fgl_flower.clients.fedstar:FedStarClient",
        tasks=("graph", "node"),
        summary="Dual-channel GIN (features + structural encodings); only the structure "
        "encoder is shared.",
        reference="Tan et al., AAAI 2023",
        options={**fedstar.OPTIONS, **DP_OPTIONS},
        check=fedstar.check_config,
        own_init=True,
        probes=fedstar.PROBES,
        defaults={"num-layers": 3, "lr": 0.001, "local-epochs": 1},
        robust_aggregation=True,
    ),
    MethodSpec(
        name="gcfl",
        strategy="fgl_flower.strategies.gcfl:GCFLStrategy",
        client="fgl_flower.clients.gcfl:GCFLClient",
        tasks=("node", "graph"),
        summary="Clustered FedAvg: clusters split by a min cut of the clients' update "
        "similarities when their updates cancel out.",
        reference="Xie et al., NeurIPS 2021",
        options=gcfl.GCFLOptions.defaults(),
        check=gcfl.check_config,
        probes=gcfl.PROBES,
    ),
    MethodSpec(
        name="feddense",
        strategy="fgl_flower.strategies.feddense:FedDenseStrategy",
        client="fgl_flower.clients.feddense:FedDenseClient",
        tasks=("graph",),
        summary="Dual-densely connected GNN: feature layers read every earlier map of both "
        "channels; only the narrow structural channel is shared.",
        reference="Wang et al., arXiv:2408.11662 (2024)",
        options=feddense.FedDenseOptions.defaults(),
        check=feddense.check_config,
        own_init=True,
        probes=feddense.PROBES,
        defaults={"dataset": "synthetic-graphs", "partition": "random", "model": "gin"},
        robust_aggregation=True,
    ),
    MethodSpec(
        name="fedhero",
        strategy="fgl_flower.strategies.fedhero:FedHEROStrategy",
        client="fgl_flower.clients.fedhero:FedHEROClient",
        tasks=("node",),
        summary="Dual-channel GNN for heterophilic graphs: a latent kNN graph from a shared "
        "structure learner beside the original graph; only the latent-graph channel is shared.",
        reference="Chen et al., FedHERO, arXiv:2504.21206 (2025)",
        options=fedhero.FedHEROOptions.defaults(),
        check=fedhero.check_config,
        own_init=True,
        probes=fedhero.PROBES,
        defaults={"lr": 0.005, "local-epochs": 1},
        robust_aggregation=True,
    ),
    MethodSpec(
        name="fedlit",
        strategy="fgl_flower.strategies.fedlit:FedLitStrategy",
        client="fgl_flower.clients.fedlit:FedLitClient",
        tasks=("node",),
        summary="Latent link types found by clustering the edges (E-M on their embeddings), one "
        "GCN channel per type; the server aligns the clients' types and averages each type's channel.",
        reference="Xie, Xiong and Yang, FedLit, WWW 2023",
        options=fedlit.FedLitOptions.defaults(),
        check=fedlit.check_config,
        probes=fedlit.PROBES,
    ),
    MethodSpec(
        name="fedlog",
        strategy="fgl_flower.strategies.fedlog:FedLoGStrategy",
        client="fgl_flower.clients.fedlog:FedLoGClient",
        tasks=("node",),
        summary="Clients learn class-wise synthetic nodes (head and tail prototypes); the server "
        "condenses them into global synthetic nodes that every client then also trains on.",
        reference="Kim et al., FedLoG, ICLR 2025",
        options=fedlog.FedLoGOptions.defaults(),
        check=fedlog.check_config,
        own_init=True,
        probes=fedlog.PROBES,
        defaults={"model": "graphsage", "agg-weight": "uniform", "lr": 0.001, "weight-decay": 5e-4,
                  "local-epochs": 1},
    ),
    MethodSpec(
        name="fedpub",
        strategy="fgl_flower.strategies.fedpub:FedPubStrategy",
        client="fgl_flower.clients.fedpub:FedPubClient",
        tasks=("node",),
        summary="Personalised averages weighted by the similarity of the clients' functional "
        "embeddings on a random proxy graph; personalised sparse masks stay on the clients.",
        reference="Baek et al., FED-PUB, ICML 2023",
        options=fedpub.FedPubOptions.defaults(),
        check=fedpub.check_config,
        own_init=True,
        probes=fedpub.PROBES,
        defaults={"num-rounds": 100, "hidden": 128, "weight-decay": 1e-6, "local-epochs": 1},
    ),
    MethodSpec(
        name="fedgta",
        strategy="fgl_flower.strategies.fedgta:FedGTAStrategy",
        client="fgl_flower.clients.fedgta:FedGTAClient",
        tasks=("node",),
        summary="Personalised averages over the clients whose label-propagated predictions have "
        "similar moments, weighted by their topology-aware smoothing confidence; any node backbone.",
        reference="Li et al., FedGTA, VLDB 2024",
        options=fedgta.FedGTAOptions.defaults(),
        check=fedgta.check_config,
        probes=fedgta.PROBES,
        defaults={"num-rounds": 100},
    ),
    MethodSpec(
        name="fedtad",
        strategy="fgl_flower.strategies.fedtad:FedTADStrategy",
        client="fgl_flower.clients.fedtad:FedTADClient",
        tasks=("node",),
        summary="FedAvg plus data-free distillation on the server: a generator builds a pseudo-graph "
        "on which the global model learns the clients' class-wise reliable predictions.",
        reference="Zhu et al., FedTAD, IJCAI 2024",
        options=fedtad.FedTADOptions.defaults(),
        check=fedtad.check_config,
        probes=fedtad.PROBES,
        defaults={"num-rounds": 100, "agg-weight": "local"},
    ),
    MethodSpec(
        name="fgssl",
        strategy="fgl_flower.strategies.fgssl:FGSSLStrategy",
        client="fgl_flower.clients.fgssl:FGSSLClient",
        tasks=("node",),
        summary="FedAvg plus a node-level semantic contrast with the global model and a distillation "
        "of each node's neighbour-similarity distribution from it, on weak/strong graph views.",
        reference="Huang et al., FGSSL, IJCAI 2023",
        options=fgssl.FGSSLOptions.defaults(),
        check=fgssl.check_config,
        probes=fgssl.PROBES,
        defaults={"num-rounds": 100},
        robust_aggregation=True,
    ),
    MethodSpec(
        name="fedsageplus",
        strategy="fgl_flower.strategies.fedsageplus:FedSagePlusStrategy",
        client="fgl_flower.clients.fedsageplus:FedSagePlusClient",
        tasks=("node",),
        summary="Missing-neighbour generators trained across clients (each client's feature loss "
        "also against targets from the others, as gradients), then FedAvg of a GraphSAGE on each "
        "subgraph mended with generated neighbours.",
        reference="Zhang et al., FedSage+, NeurIPS 2021",
        options=fedsageplus.FedSagePlusOptions.defaults(),
        check=fedsageplus.check_config,
        probes=fedsageplus.PROBES,
        query_actions=("generate", "cross_grad"),
        defaults={"num-rounds": 40, "model": "graphsage"},
    ),
    MethodSpec(
        name="fggp",
        strategy="fgl_flower.strategies.fggp:FGGPStrategy",
        client="fgl_flower.clients.fggp:FGGPClient",
        tasks=("node",),
        summary="FedAvg of a GCN (or ACM-GCN) trained with a learned edge augmentor over the global model's "
        "k-NN graph and a prototype contrast between the views; the server clusters the clients' "
        "class prototypes (FINCH) into a memory that classifies by k-NN.",
        reference="Wan et al., FGGP, AAAI 2024",
        options=fggp.FGGPOptions.defaults(),
        check=fggp.check_config,
        own_init=True,
        probes=fggp.PROBES,
        defaults={"num-rounds": 100, "agg-weight": "local"},
    ),
):
    register_method(_spec)
