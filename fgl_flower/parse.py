"""Validation of Flower's flat run config: :func:`parse_run_config` turns it into a frozen
:class:`~fgl_flower.config.RunConfig`, checking the core keys (:data:`RULES`, the choices of
:data:`~fgl_flower.config.CHOICES`, :data:`CROSS_CHECKS`) and the selected method's options
(its spec's ``check``), with one clear :class:`~fgl_flower.errors.ConfigError` for anything
malformed. Called by the CLI before anything starts and again by the ServerApp and ClientApp.

It lives apart from :mod:`fgl_flower.config` because the registry's option modules import the
config: here the config layer and the registry meet without an import circle.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fgl_flower.config import (
    CHOICES,
    CORE_KEYS,
    FOLDS,
    FOLLOW_FEDERATION,
    RunConfig,
    Scalar,
    coerce_value,
    parse_split,
)
from fgl_flower.dp.options import check_dp
from fgl_flower.errors import ConfigError
from fgl_flower.methods import METHODS


@dataclass(frozen=True)
class Rule:
    """What a core key's value must be: ``test(value)`` holds, else the run stops with
    ``"<key> <must> (got <value>)[: <why>]"``."""

    test: Callable[[Any], bool]
    must: str
    why: str = ""

    def check(self, key: str, value: Any) -> None:
        if not self.test(value):
            raise ConfigError(
                f"{key} {self.must} (got {value})" + (f": {self.why}." if self.why else ".")
            )


def _at_least(n: int, why: str = "") -> Rule:
    return Rule(lambda v: v >= n, f"must be at least {n}", why)


def _nonnegative(why: str = "") -> Rule:
    return Rule(lambda v: v >= 0, "must be non-negative", why)


#: The range of every core key that has one (the choices: :data:`~fgl_flower.config.CHOICES`).
RULES: dict[str, Rule] = {
    "num-rounds": _at_least(1),
    "hidden": _at_least(1),
    "num-layers": _at_least(1),
    "local-epochs": _at_least(1),
    "batch-size": _at_least(1),
    "cpus-per-client": _at_least(1),
    "min-train-clients": _at_least(1),
    "num-clients": Rule(
        lambda v: v >= FOLLOW_FEDERATION,
        f"must be at least 1, 0 for the partition's natural number of clients, or "
        f"{FOLLOW_FEDERATION} for as many as the federation's SuperNodes",
    ),
    "split-fold": Rule(
        lambda v: -1 <= v < FOLDS,
        f"must be -1 (the run seed mod {FOLDS}) or a fold 0-{FOLDS - 1} of split-mode=five-group",
    ),
    "edge-flip": Rule(
        lambda v: 0.0 <= v < 1.0,
        "must be in [0, 1)",
        "the probability that each edge of a client is replaced by a random non-edge",
    ),
    "lr": Rule(lambda v: v > 0, "must be positive"),
    "dropout": Rule(lambda v: 0.0 <= v < 1.0, "must be in [0, 1)"),
    "weight-decay": _nonnegative(),
    "fraction-train": Rule(
        lambda v: 0.0 < v <= 1.0,
        "must be in (0, 1]",
        "the share of clients sampled to train each round",
    ),
    "accept-failures": _nonnegative("how many clients of a round may fail while the round goes on"),
    "checkpoint-every": _nonnegative("checkpoint every that many rounds, 0 for never"),
    "checkpoint-dir": Rule(
        lambda v: not v or Path(str(v)).expanduser().is_absolute(), "must be an absolute path"
    ),
    "round-timeout": Rule(
        lambda v: v > 0, "must be positive", "seconds the server waits for a round's replies"
    ),
    "gpus-per-client": _nonnegative(),
    "malicious-clients": _nonnegative(),
}


def _resume_needs_checkpoints(core: Mapping[str, Scalar]) -> None:
    if core["resume"] and not int(core["checkpoint-every"]):
        raise ConfigError("resume=true needs checkpoints: checkpoint-every must be at least 1.")


def _enough_clients_to_train(core: Mapping[str, Scalar]) -> None:
    if 0 < int(core["num-clients"]) < int(core["min-train-clients"]):
        raise ConfigError(
            f"min-train-clients={core['min-train-clients']} exceeds "
            f"num-clients={core['num-clients']}."
        )


#: Checks that read several core keys.
CROSS_CHECKS: tuple[Callable[[Mapping[str, Scalar]], None], ...] = (
    _resume_needs_checkpoints,
    _enough_clients_to_train,
)


def _same(value: Scalar) -> Scalar:
    return value


#: How a core key's value becomes its :class:`~fgl_flower.config.RunConfig` field (others as
#: they are; ``split-seed``/``split-fold`` of -1 resolve to the run seed's afterwards).
CONVERT: dict[str, Callable[[Any], Any]] = {
    "split": lambda v: parse_split(str(v)),
    "model": lambda v: str(v).lower(),
    "model-init": lambda v: str(v).lower(),
}


def parse_run_config(flat: Mapping[str, Any]) -> RunConfig:
    """Validate a flat run config and build a :class:`RunConfig`.

    Method options are checked against the method's declared defaults (unknown keys for
    the selected method are errors); data options are passed on as given and checked by
    the dataset layer.

    Raises:
        ConfigError: a key is missing, has the wrong type, or a value is out of range.
        UnknownNameError: the method is not registered.
    """
    missing = [k for k in CORE_KEYS if k not in flat]
    if missing:
        raise ConfigError(f"Run config lacks required keys: {', '.join(missing)}.")
    core = {k: coerce_value(k, flat[k], t) for k, t in CORE_KEYS.items()}

    spec = METHODS.get(str(core["method"]))
    method = spec.name
    prefix = f"{method}."
    method_defaults = spec.option_defaults()
    method_options: dict[str, Scalar] = dict(method_defaults)
    data_options: dict[str, Scalar] = {}
    for key, value in flat.items():
        if key in CORE_KEYS:
            continue
        if key.startswith("data."):
            data_options[key[len("data.") :]] = value
        elif key.startswith(prefix):
            name = key[len(prefix) :]
            if name not in method_defaults:
                raise ConfigError(
                    f"Unknown option {key!r} for method {method!r}; known: "
                    f"{', '.join(prefix + n for n in sorted(method_defaults)) or 'none'}."
                )
            method_options[name] = coerce_value(key, value, type(method_defaults[name]))
        elif "." in key and key.split(".", 1)[0] in METHODS:
            other = METHODS.get(key.split(".", 1)[0])
            name = key.split(".", 1)[1]
            if name in other.options and value != other.options[name]:
                raise ConfigError(
                    f"{key}={value!r} is an option of method {other.name!r}, but the "
                    f"run's method is {method!r}: drop it, or set method={other.name}."
                )
        else:
            raise ConfigError(f"Unknown run-config key {key!r}.")

    for key, rule in RULES.items():
        rule.check(key, core[key])
    for check in CROSS_CHECKS:
        check(core)
    from fgl_flower.device import check_device_spec
    from fgl_flower.models.registry import INITS

    for key, (choices, meaning) in CHOICES.items():
        if core[key] not in choices:
            raise ConfigError(
                f"{key}={core[key]!r}: use one of {', '.join(map(repr, choices))} ({meaning})."
            )
    INITS.get(str(core["model-init"]))
    values = {key.replace("-", "_"): CONVERT.get(key, _same)(value) for key, value in core.items()}
    values["device"] = check_device_spec(values["device"])
    seed = values["seed"]
    if values["split_seed"] < 0:  # -1: the run seed
        values["split_seed"] = seed
    if values["split_fold"] < 0:  # -1: the run seed's fold
        values["split_fold"] = seed % FOLDS
    cfg = RunConfig(
        **values,
        data_options=tuple(sorted(data_options.items())),
        method_options=tuple(sorted(method_options.items())),
        raw=tuple(sorted((k, v) for k, v in flat.items())),
    )
    if spec.own_init and cfg.model_init != "default":
        raise ConfigError(
            f"{method} builds its own model and initialises it as its code does; "
            f"model-init={cfg.model_init!r} would not reach it: leave model-init at "
            "'default' for this method."
        )
    if spec.check is not None:
        spec.check(cfg)
    _check_secure_aggregation(cfg)
    check_dp(cfg)
    _check_aggregation(cfg, spec)
    return cfg


def _check_aggregation(cfg: RunConfig, spec) -> None:
    """A robust ``aggregation`` rule needs a method whose server averages through it, and
    neither DP (its noise is sized for the mean) nor SecAgg+ (the server sees only sums)."""
    if cfg.aggregation == "mean":
        return
    from fgl_flower.dp.options import dp_settings
    from fgl_flower.secagg.protocol import SECURE_AGGREGATION

    if not spec.robust_aggregation:
        able = sorted(name for name, s in METHODS.items() if s.robust_aggregation)
        raise ConfigError(
            f"aggregation={cfg.aggregation!r}: {cfg.method}'s server does not average through "
            f"the robust rules; methods that do: {', '.join(able)}."
        )
    if dp_settings(cfg) is not None:
        raise ConfigError(
            f"aggregation={cfg.aggregation!r} with {cfg.method}.dp-clip: the DP noise is sized "
            "for the mean of clipped updates; use aggregation=mean under DP."
        )
    if dict(cfg.method_options).get(SECURE_AGGREGATION):
        raise ConfigError(
            f"aggregation={cfg.aggregation!r} with {cfg.method}.{SECURE_AGGREGATION}: the server "
            "sees only the sum of the uploads; a robust rule needs each one."
        )
    if cfg.num_clients < 1:
        return  # the count is resolved later (fgl run), and parsed again then
    from fgl_flower.strategies.robust import needed
    from fgl_flower.strategies.sampling import sample_size

    fewest = (
        sample_size(cfg.num_clients, cfg.fraction_train, cfg.min_train_clients)
        - cfg.accept_failures
    )
    if fewest < (need := needed(cfg.aggregation, cfg.malicious_clients)):
        raise ConfigError(
            f"aggregation={cfg.aggregation!r} with malicious-clients={cfg.malicious_clients} needs "
            f"{need} uploads a round, but a round may keep only {fewest} (the clients it samples "
            "less accept-failures): lower malicious-clients or accept-failures, or add clients."
        )


def _check_secure_aggregation(cfg: RunConfig) -> None:
    """SecAgg+ sums over each round's clients: a round of one client has nothing to hide it in."""
    from fgl_flower.secagg.protocol import SECURE_AGGREGATION

    if not dict(cfg.method_options).get(SECURE_AGGREGATION) or cfg.num_clients < 1:
        return
    from fgl_flower.strategies.sampling import sample_size  # the server's package: only when needed

    per_round = sample_size(cfg.num_clients, cfg.fraction_train, cfg.min_train_clients)
    if per_round < 2:
        raise ConfigError(
            f"{cfg.method}.{SECURE_AGGREGATION} needs at least 2 clients in every round "
            f"(this run samples {per_round}): raise num-clients, fraction-train or "
            "min-train-clients."
        )
