"""What a method is, in one torch-free record: :class:`MethodSpec`.

Each module ``fgl_flower/methods/<m>.py`` ends with ``SPEC = MethodSpec(...)``: its options
with their defaults and checks, its probes, the record keys both of its halves use, the tasks
it supports, its summary and paper, and the ``"module:Class"`` names of its server and client.
The registry (:mod:`fgl_flower.methods`) collects them; nothing else lists a method.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fgl_flower.config import RunConfig
from fgl_flower.probes import Probe
from fgl_flower.registry import import_object

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
        demo: Option values of the no-option demo only: applied where the run names no
            dataset (the app's small synthetic graph) and the user did not set them, so that
            ``fgl run --method <name>`` finishes in about a minute while a run on real data
            keeps the method's faithful defaults (e.g. Co-Boost's 200 distillation epochs).
        probes: The quantities that show its mechanism working (:mod:`fgl_flower.probes`),
            recorded every round; a run warns when one is dead.
        own_init: Its client builds its own model and initialises it as the method's code
            does, so the run's ``model-init`` does not reach it: a run that sets another
            ``model-init`` than ``default`` stops before training instead of ignoring it.
        option_help: What each option means, one line each (``fgl config`` and the
            comments of the generated Flower app config show it).
        config_note: One line above the method's section of the app config (what it needs,
            whose defaults these are).
        space: What ``fgl tune`` varies of its own options, beside the keys every method
            shares (:data:`fgl_flower.tuning.space.SHARED_SPACE`): option name (as in
            ``options``) to a range or choice as text (``"0.001..1:log"``, ``"1..10"``,
            ``"a,b"``; :mod:`fgl_flower.tuning.space`); ``"graph:eps1"`` limits an option
            to runs on graph-level data (``node:`` to node-level). ``{}``: only the shared keys;
            ``None`` (a method registered elsewhere may leave it): no declared space, a
            study must give every key.
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
    demo: Mapping[str, Scalar] = field(default_factory=dict)
    own_init: bool = False
    robust_aggregation: bool = False
    option_help: Mapping[str, str] = field(default_factory=dict)
    config_note: str = ""
    space: Mapping[str, str] | None = None

    def option_defaults(self) -> dict[str, Scalar]:
        return dict(self.options)

    def strategy_class(self) -> type[FGLStrategy]:
        """The strategy class (imported now if registered by path)."""
        return import_object(self.strategy)

    def client_class(self) -> type[FGLClient]:
        """The client class (imported now if registered by path)."""
        return import_object(self.client)

    def build_strategy(self, cfg: RunConfig) -> FGLStrategy:
        """The method's server for the run ``cfg``, watching the method's probes."""
        return self.strategy_class()(cfg).watch(self.probes)
