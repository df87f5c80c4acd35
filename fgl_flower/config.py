"""Run configuration: one validated, typed view of Flower's flat run config.

Flower passes the run config as a flat ``{key: int | float | bool | str}`` mapping whose
defaults are the app config's (:mod:`fgl_flower.app_defaults`: the core keys of
``run_config.toml`` and the method specs' options). Keys are grouped:

* plain keys (``method``, ``dataset``, ``num-rounds``, ``lr``, ...) for every run;
* ``data.<option>`` keys, options of the partitioner or of the synthetic generator;
* ``<method>.<option>`` keys, hyperparameters of one method (e.g. ``fedprox.mu``).

This module is the typed config (:class:`RunConfig`, the option base
:class:`MethodOptions`, the core keys and their coercion); it imports no method. The app's
defaults are read by :mod:`fgl_flower.app_defaults`. :func:`fgl_flower.parse.parse_run_config` validates a flat mapping against it and
the method registry (whose option modules import this one).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from fgl_flower.errors import ConfigError
from fgl_flower.tasks import AUTO, TASKS

Scalar = int | float | bool | str

#: Keys that every run has, with their types. Their defaults and meanings: fgl_flower/run_config.toml.
CORE_KEYS: dict[str, type] = {
    "method": str,
    "dataset": str,
    "task": str,
    "partition": str,
    "num-clients": int,
    "num-rounds": int,
    "seed": int,
    "partition-seed": int,
    "split": str,
    "split-mode": str,
    "split-seed": int,
    "split-fold": int,
    "edge-flip": float,
    "data-root": str,
    "out-dir": str,
    "model": str,
    "link-decoder": str,
    "link-negatives": str,
    "hidden": int,
    "num-layers": int,
    "dropout": float,
    "model-init": str,
    "lr": float,
    "weight-decay": float,
    "local-epochs": int,
    "batch-size": int,
    "keep-optimizer-state": bool,
    "progress": bool,
    "select-by": str,
    "eval-dropout": bool,
    "eval-weight": str,
    "optimizer": str,
    "agg-weight": str,
    "aggregation": str,
    "malicious-clients": int,
    "device": str,
    "cpus-per-client": int,
    "gpus-per-client": float,
    "fraction-train": float,
    "min-train-clients": int,
    "fused-evaluation": bool,
    "reuse-clients": bool,
    "accept-failures": int,
    "round-timeout": float,
    "on-nonfinite": str,
    "untrained-classes": str,
    "checkpoint-every": int,
    "checkpoint-dir": str,
    "resume": bool,
}

#: ``num-clients`` that follows the federation: as many clients as its SuperNodes serve
#: partitions (their ``num-partitions``), so that ``flwr run .`` works with any federation.
FOLLOW_FEDERATION = -1

#: Core keys with a fixed set of values: the values and what the key chooses
#: (``model-init`` is checked against :data:`fgl_flower.models.INITS`).
CHOICES: dict[str, tuple[tuple[str, ...], str]] = {
    "split-mode": (
        ("random", "stratified", "stratified-sequential", "five-group", "official"),
        "per-client splits at random, per class, per class from one stream over the "
        "clients, five node groups of the whole graph rotated by split-fold, or the "
        "split the dataset ships (OGB's, a user graph's masks)",
    ),
    "task": ((AUTO, *TASKS), "what the run learns: the dataset's own (auto), or a task by name"),
    "link-decoder": (
        ("dot", "mlp"),
        "task=link: score a node pair by the dot product of its embeddings, or by an MLP "
        "on their elementwise product",
    ),
    "link-negatives": (
        ("resample", "fixed"),
        "task=link: draw the training non-edges anew each local epoch, or once per client "
        "for the whole run (OpenFGL's link prediction)",
    ),
    "select-by": (
        tuple(sorted({m for _, t in TASKS.items() for m in t.selectable})),
        "the validation metric that picks the reported round (one the run's task reports)",
    ),
    "eval-weight": (
        ("split", "client-size", "client"),
        "pool each metric over the clients' "
        "val/test examples, weight clients by their size, or count each client once",
    ),
    "optimizer": (("adam", "sgd"), "the local optimizer: Adam, or plain SGD without momentum"),
    "agg-weight": (
        ("train", "local", "uniform"),
        "weight each upload in FedAvg-style averaging by "
        "the client's training examples, by all its local examples (nodes/graphs), or "
        "equally (what differential privacy needs)",
    ),
    "aggregation": (
        ("mean", "median", "trimmed-mean", "krum", "multi-krum"),
        "the FedAvg family's "
        "rule for combining the uploads: the weighted mean, or a rule robust to "
        "malicious-clients arbitrary uploads (fgl_flower.strategies.robust)",
    ),
    "on-nonfinite": (
        ("stop", "skip"),
        "a client reporting a NaN or infinite loss or metric "
        "stops the run, or is left out of its round (recorded)",
    ),
    "untrained-classes": (
        ("stop", "allow"),
        "a class with no training example on any client "
        "stops the run before training, or is allowed with a warning (it "
        "cannot be learned; e.g. Texas' one-node class in a random split)",
    ),
}


@dataclass(frozen=True)
class RunConfig:
    """Typed, validated run configuration.

    ``split_seed`` of ``-1`` in the flat config means "use ``seed``", so by default each
    seed draws its own per-client splits while the partition (``partition_seed``) stays
    fixed across seeds, as in most FGL papers. ``split_fold`` of ``-1`` means "``seed`` mod
    5" (``split-mode=five-group``: seeds 0-4 rotate the five folds). ``num_clients`` of 0
    asks for the partition's natural count; ``fgl run`` resolves it before the run starts.
    ``num_clients`` of -1 (:data:`FOLLOW_FEDERATION`, the app's default) follows the
    federation: the server and each client read it from the SuperNodes' ``num-partitions``.
    """

    method: str
    dataset: str
    partition: str
    num_clients: int
    num_rounds: int
    seed: int
    partition_seed: int
    split: tuple[float, float, float]
    split_mode: str
    split_seed: int
    data_root: str
    out_dir: str
    model: str
    hidden: int
    num_layers: int
    dropout: float
    model_init: str
    lr: float
    weight_decay: float
    local_epochs: int
    batch_size: int
    keep_optimizer_state: bool
    progress: bool
    select_by: str
    eval_weight: str = "split"
    eval_dropout: bool = False
    optimizer: str = "adam"
    agg_weight: str = "train"
    aggregation: str = "mean"
    malicious_clients: int = 1
    device: str = "auto"
    cpus_per_client: int = 1
    gpus_per_client: float = 0.0
    fraction_train: float = 1.0
    min_train_clients: int = 1
    fused_evaluation: bool = True
    reuse_clients: bool = True
    accept_failures: int = 0
    round_timeout: float = 3600.0
    on_nonfinite: str = "stop"
    untrained_classes: str = "stop"
    checkpoint_every: int = 1
    checkpoint_dir: str = ""
    resume: bool = False
    split_fold: int = 0
    edge_flip: float = 0.0
    task: str = AUTO
    link_decoder: str = "dot"
    link_negatives: str = "resample"
    data_options: tuple[tuple[str, Scalar], ...] = ()
    method_options: tuple[tuple[str, Scalar], ...] = ()
    raw: tuple[tuple[str, Scalar], ...] = field(default=(), compare=False, repr=False)

    def option(self, name: str) -> Scalar:
        """A method option (``<method>.<name>`` in the flat config)."""
        opts = dict(self.method_options)
        if name not in opts:
            raise ConfigError(
                f"Method {self.method!r} has no option {name!r} "
                f"(known: {', '.join(sorted(opts)) or 'none'})."
            )
        return opts[name]

    def data_config(self):
        """The :class:`~fgl_flower.datasets.DataConfig` of this run.

        Data options are namespaced in the flat config: ``data.<option>`` for any dataset
        (e.g. ``data.undirected``), ``data.<partitioner>.<option>`` and
        ``data.<dataset>.<option>`` (e.g. ``data.synthetic.num-nodes``); only the namespaces
        this run uses are passed on, and empty strings mean "not set".
        """
        from fgl_flower.datasets import DataConfig
        from fgl_flower.registry import _norm

        scopes = {"", _norm(self.partition), _norm(self.dataset)}
        options = {}
        for key, value in self.data_options:
            scope, _, name = key.rpartition(".")
            if _norm(scope) in scopes and value != "":
                options[name] = value
        return DataConfig(
            dataset=self.dataset,
            partition=self.partition,
            num_clients=self.num_clients,
            partition_seed=self.partition_seed,
            split=self.split,
            split_mode=self.split_mode,
            split_seed=self.split_seed,
            data_root=self.data_root or None,
            options=tuple(sorted(options.items())),
            split_fold=self.split_fold,
            edge_flip=self.edge_flip,
            task=self.task,
        )

    def to_json(self) -> str:
        """JSON of the resolved config (for ``config.json`` in the run folder)."""
        d = asdict(self)
        d.pop("raw")
        d["data_options"] = dict(self.data_options)
        d["method_options"] = dict(self.method_options)
        return json.dumps(d, indent=2, sort_keys=True)

    def flat(self) -> dict[str, Scalar]:
        """The flat mapping this config was parsed from."""
        return dict(self.raw)


class MethodOptions:
    """Base of a method's frozen options dataclass: field ``foo_bar`` is the run-config
    key ``<method>.foo-bar`` and its default is the registered default."""

    @classmethod
    def from_config(cls, cfg: RunConfig):
        return cls(**{f.name: cfg.option(f.name.replace("_", "-")) for f in fields(cls)})

    @classmethod
    def defaults(cls) -> dict[str, Scalar]:
        """``<option>: default`` for the method registry."""
        return {f.name.replace("_", "-"): f.default for f in fields(cls)}

    def require_at_least_one(self, method: str, *names: str) -> None:
        """Raise :class:`ConfigError` naming the first option of ``names`` below 1."""
        for name in names:
            if getattr(self, name) < 1:
                raise ConfigError(f"{method}.{name.replace('_', '-')} must be at least 1.")

    def require_choice(self, method: str, name: str, choices: tuple[str, ...]) -> None:
        """Raise :class:`ConfigError` when option ``name`` is not one of ``choices``."""
        value = getattr(self, name)
        if value not in choices:
            raise ConfigError(
                f"{method}.{name.replace('_', '-')}={value!r}: use one of {', '.join(choices)}."
            )

    def require_nonnegative(self, method: str, *names: str) -> None:
        """Raise :class:`ConfigError` naming the first option of ``names`` that is not a finite
        number >= 0 (a weight, a rate)."""
        for name in names:
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ConfigError(
                    f"{method}.{name.replace('_', '-')}={value} must be a finite number >= 0."
                )

    def require_positive(self, method: str, *names: str) -> None:
        """Raise :class:`ConfigError` naming the first option of ``names`` that is not a finite
        number > 0 (a temperature)."""
        for name in names:
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ConfigError(
                    f"{method}.{name.replace('_', '-')}={value} must be a positive number."
                )


#: Folds of ``split-mode=five-group`` (``split-fold`` -1: the run seed mod this).
FOLDS = 5


def parse_split(text: str) -> tuple[float, float, float]:
    """Parse ``"0.6,0.2,0.2"`` (or ``/``-separated) into three ratios summing to 1."""
    parts = [p for p in str(text).replace("/", ",").split(",") if p.strip()]
    try:
        ratios = tuple(float(p) for p in parts)
    except ValueError:
        raise ConfigError(f"split={text!r} is not three numbers like '0.6,0.2,0.2'.") from None
    if len(ratios) != 3 or any(r < 0 for r in ratios):
        raise ConfigError(f"split={text!r} must be three non-negative ratios train,val,test.")
    if abs(sum(ratios) - 1.0) > 1e-6:
        raise ConfigError(
            f"split={text!r}: train/val/test ratios sum to {sum(ratios):g}, not 1. "
            "Use e.g. split='0.6,0.2,0.2'."
        )
    return ratios  # type: ignore[return-value]


def coerce_value(key: str, value: Any, typ: type) -> Scalar:
    """Check/convert one value to ``typ`` (ints are accepted where floats are expected)."""
    if typ is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
    elif typ is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
    elif typ is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
    elif typ is str:
        if isinstance(value, str):
            return value
        return str(value)
    raise ConfigError(f"{key}={value!r}: expected a {typ.__name__}.")
