"""The method registry: a declarative table of every method of the package.

Adding a method = ``strategies/<m>.py`` + ``clients/<m>.py`` + one :class:`MethodSpec`
entry here (and its option defaults under ``[tool.flwr.app.config.<m>]`` in
``pyproject.toml``, which a contract test keeps in sync with ``options`` below).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from fgl_flower.clients.base import FGLClient
from fgl_flower.clients.fedavg import FedAvgClient
from fgl_flower.clients.fedspray import FedSprayClient
from fgl_flower.clients.fedspray import check_config as check_fedspray
from fgl_flower.clients.fedprox import FedProxClient
from fgl_flower.clients.local import LocalClient
from fgl_flower.clients.opfgl import OPFGLClient, OPFGLOptions
from fgl_flower.clients.opfgl import check_config as check_opfgl
from fgl_flower.clients.s2fgl import S2FGLClient, S2FGLOptions
from fgl_flower.clients.s2fgl import check_config as check_s2fgl
from fgl_flower.config import RunConfig
from fgl_flower.registry import Registry
from fgl_flower.strategies.base import FGLStrategy
from fgl_flower.strategies.fedavg import FedAvgStrategy
from fgl_flower.strategies.fedspray import FedSprayStrategy
from fgl_flower.strategies.fedprox import FedProxStrategy
from fgl_flower.strategies.local import LocalStrategy
from fgl_flower.strategies.opfgl import OPFGLStrategy
from fgl_flower.strategies.s2fgl import S2FGLStrategy

Scalar = int | float | bool | str


@dataclass(frozen=True)
class MethodSpec:
    """One registered method.

    Attributes:
        name: Config/CLI name (``method=<name>``).
        strategy: Server half, a :class:`FGLStrategy` subclass.
        client: Client half, a :class:`FGLClient` subclass.
        tasks: Tasks it supports (``"node"``, ``"graph"``).
        options: Method hyperparameters and their defaults (``<name>.<option>`` keys).
        summary: One line for docs and ``fgl methods``.
        reference: Paper it implements.
        check: Validates the method's options of a parsed config (raises
            :class:`~fgl_flower.errors.ConfigError`); run before anything starts.
    """

    name: str
    strategy: type[FGLStrategy]
    client: type[FGLClient]
    tasks: tuple[str, ...]
    summary: str
    reference: str = ""
    options: Mapping[str, Scalar] = field(default_factory=dict)
    check: Callable[[RunConfig], None] | None = None

    def option_defaults(self) -> dict[str, Scalar]:
        return dict(self.options)


METHODS: Registry[MethodSpec] = Registry("method")


def register_method(spec: MethodSpec) -> MethodSpec:
    """Register ``spec`` with its options frozen (read-only mapping)."""
    frozen = replace(spec, options=MappingProxyType(dict(spec.options)))
    METHODS.register(spec.name, frozen)
    return frozen


for _spec in (
    MethodSpec(
        name="local",
        strategy=LocalStrategy,
        client=LocalClient,
        tasks=("node", "graph"),
        summary="Each client trains alone; nothing is averaged.",
    ),
    MethodSpec(
        name="fedavg",
        strategy=FedAvgStrategy,
        client=FedAvgClient,
        tasks=("node", "graph"),
        summary="Average of the shared parameters weighted by training examples.",
        reference="McMahan et al., AISTATS 2017",
        options={"finetune-epochs": 0},
    ),
    MethodSpec(
        name="fedprox",
        strategy=FedProxStrategy,
        client=FedProxClient,
        tasks=("node", "graph"),
        summary="FedAvg with a proximal term mu/2 ||w - w_global||^2 in the local loss.",
        reference="Li et al., MLSys 2020",
        options={"mu": 0.01, "finetune-epochs": 0},
    ),
    MethodSpec(
        name="fedspray",
        strategy=FedSprayStrategy,
        client=FedSprayClient,
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
        },
        check=check_fedspray,
    ),
    MethodSpec(
        name="opfgl",
        strategy=OPFGLStrategy,
        client=OPFGLClient,
        tasks=("node",),
        summary="One-shot: class statistics up, a condensed global pseudo-graph down, then "
        "local two-stage training with node-adaptive distillation.",
        reference="Yan et al., O-pFGL (one-shot personalized FGL)",
        options=OPFGLOptions.defaults(),
        check=check_opfgl,
    ),
    MethodSpec(
        name="s2fgl",
        strategy=S2FGLStrategy,
        client=S2FGLClient,
        tasks=("node",),
        summary="FedAvg with a SALC-prototype knowledge repository (NLIR distillation) and "
        "spectral alignment to the global model (FGMA).",
        reference="Tan et al., ICML 2025",
        options=S2FGLOptions.defaults(),
        check=check_s2fgl,
    ),
):
    register_method(_spec)
