"""Validation of Flower's flat run config: :func:`parse_run_config` turns it into a frozen
:class:`~fgl_flower.config.RunConfig`, checking the core keys and the selected method's
options (from the method registry), with one clear
:class:`~fgl_flower.errors.ConfigError` for anything malformed. Called by the CLI before
anything starts and again by the ServerApp and ClientApp.

It lives apart from :mod:`fgl_flower.config` because the registry's option modules import the
config: here the config layer and the registry meet without an import circle.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fgl_flower.config import (
    CHOICES, CORE_KEYS, FOLDS, FOLLOW_FEDERATION, RunConfig, Scalar, _check_split_fold, coerce_value, parse_split,
)
from fgl_flower.dp.options import check_dp
from fgl_flower.errors import ConfigError
from fgl_flower.methods import METHODS


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
            data_options[key[len("data."):]] = value
        elif key.startswith(prefix):
            name = key[len(prefix):]
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
                raise ConfigError(f"{key}={value!r} is an option of method {other.name!r}, but the "
                                  f"run's method is {method!r}: drop it, or set method={other.name}.")
        else:
            raise ConfigError(f"Unknown run-config key {key!r}.")

    for key in ("num-rounds", "hidden", "num-layers", "local-epochs", "batch-size",
                "cpus-per-client", "min-train-clients"):
        if int(core[key]) < 1:
            raise ConfigError(f"{key} must be at least 1 (got {core[key]}).")
    if int(core["num-clients"]) < FOLLOW_FEDERATION:
        raise ConfigError(f"num-clients must be at least 1, 0 for the partition's natural number "
                          f"of clients, or {FOLLOW_FEDERATION} for as many as the federation's "
                          f"SuperNodes (got {core['num-clients']}).")
    _check_split_fold(int(core["split-fold"]))
    if not 0.0 <= float(core["edge-flip"]) < 1.0:
        raise ConfigError(f"edge-flip must be in [0, 1) (got {core['edge-flip']}): the probability "
                          "that each edge of a client is replaced by a random non-edge.")
    for key in ("lr",):
        if float(core[key]) <= 0:
            raise ConfigError(f"{key} must be positive (got {core[key]}).")
    if not 0.0 <= float(core["dropout"]) < 1.0:
        raise ConfigError(f"dropout must be in [0, 1) (got {core['dropout']}).")
    if float(core["weight-decay"]) < 0:
        raise ConfigError(f"weight-decay must be non-negative (got {core['weight-decay']}).")
    if not 0.0 < float(core["fraction-train"]) <= 1.0:
        raise ConfigError(f"fraction-train must be in (0, 1] (got {core['fraction-train']}): the "
                          "share of clients sampled to train each round.")
    if int(core["accept-failures"]) < 0:
        raise ConfigError(f"accept-failures must be non-negative (got {core['accept-failures']}): "
                          "how many clients of a round may fail while the round goes on.")
    if int(core["checkpoint-every"]) < 0:
        raise ConfigError(f"checkpoint-every must be non-negative (got {core['checkpoint-every']}): "
                          "checkpoint every that many rounds, 0 for never.")
    if core["checkpoint-dir"] and not Path(str(core["checkpoint-dir"])).expanduser().is_absolute():
        raise ConfigError(f"checkpoint-dir={core['checkpoint-dir']!r} must be an absolute path.")
    if core["resume"] and not int(core["checkpoint-every"]):
        raise ConfigError("resume=true needs checkpoints: checkpoint-every must be at least 1.")
    if float(core["round-timeout"]) <= 0:
        raise ConfigError(f"round-timeout must be positive (got {core['round-timeout']}): seconds "
                          "the server waits for a round's replies.")
    if 0 < int(core["num-clients"]) < int(core["min-train-clients"]):
        raise ConfigError(f"min-train-clients={core['min-train-clients']} exceeds "
                          f"num-clients={core['num-clients']}.")
    if float(core["gpus-per-client"]) < 0:
        raise ConfigError(f"gpus-per-client must be non-negative (got {core['gpus-per-client']}).")
    from fgl_flower.device import check_device_spec

    device = check_device_spec(str(core["device"]))
    for key, (choices, meaning) in CHOICES.items():
        if core[key] not in choices:
            raise ConfigError(
                f"{key}={core[key]!r}: use one of {', '.join(map(repr, choices))} ({meaning})."
            )
    from fgl_flower.models.registry import INITS

    INITS.get(str(core["model-init"]))
    seed = int(core["seed"])
    split_seed = int(core["split-seed"])
    split_fold = int(core["split-fold"])
    cfg = RunConfig(
        method=method,
        dataset=str(core["dataset"]),
        partition=str(core["partition"]),
        num_clients=int(core["num-clients"]),
        num_rounds=int(core["num-rounds"]),
        seed=seed,
        partition_seed=int(core["partition-seed"]),
        split=parse_split(str(core["split"])),
        split_mode=str(core["split-mode"]),
        split_seed=seed if split_seed < 0 else split_seed,
        data_root=str(core["data-root"]),
        out_dir=str(core["out-dir"]),
        model=str(core["model"]).lower(),
        hidden=int(core["hidden"]),
        num_layers=int(core["num-layers"]),
        dropout=float(core["dropout"]),
        model_init=str(core["model-init"]).lower(),
        lr=float(core["lr"]),
        weight_decay=float(core["weight-decay"]),
        local_epochs=int(core["local-epochs"]),
        batch_size=int(core["batch-size"]),
        keep_optimizer_state=bool(core["keep-optimizer-state"]),
        progress=bool(core["progress"]),
        select_by=str(core["select-by"]),
        eval_weight=str(core["eval-weight"]),
        eval_dropout=bool(core["eval-dropout"]),
        optimizer=str(core["optimizer"]),
        agg_weight=str(core["agg-weight"]),
        aggregation=str(core["aggregation"]),
        malicious_clients=int(core["malicious-clients"]),
        device=device,
        cpus_per_client=int(core["cpus-per-client"]),
        gpus_per_client=float(core["gpus-per-client"]),
        fraction_train=float(core["fraction-train"]),
        min_train_clients=int(core["min-train-clients"]),
        fused_evaluation=bool(core["fused-evaluation"]),
        reuse_clients=bool(core["reuse-clients"]),
        accept_failures=int(core["accept-failures"]),
        round_timeout=float(core["round-timeout"]),
        on_nonfinite=str(core["on-nonfinite"]),
        untrained_classes=str(core["untrained-classes"]),
        checkpoint_every=int(core["checkpoint-every"]),
        checkpoint_dir=str(core["checkpoint-dir"]),
        resume=bool(core["resume"]),
        split_fold=seed % FOLDS if split_fold < 0 else split_fold,
        edge_flip=float(core["edge-flip"]),
        data_options=tuple(sorted(data_options.items())),
        method_options=tuple(sorted(method_options.items())),
        raw=tuple(sorted((k, v) for k, v in flat.items())),
    )
    if spec.own_init and cfg.model_init != "default":
        raise ConfigError(f"{method} builds its own model and initialises it as its code does; "
                          f"model-init={cfg.model_init!r} would not reach it: leave model-init at "
                          "'default' for this method.")
    if spec.check is not None:
        spec.check(cfg)
    _check_secure_aggregation(cfg)
    check_dp(cfg)
    _check_aggregation(cfg, spec)
    return cfg


def _check_aggregation(cfg: RunConfig, spec) -> None:
    """A robust ``aggregation`` rule needs a method whose server averages through it, and
    neither DP (its noise is sized for the mean) nor SecAgg+ (the server sees only sums)."""
    if int(cfg.malicious_clients) < 0:
        raise ConfigError(f"malicious-clients must be non-negative (got {cfg.malicious_clients}).")
    if cfg.aggregation == "mean":
        return
    from fgl_flower.dp.options import dp_settings
    from fgl_flower.secagg.protocol import SECURE_AGGREGATION

    if not spec.robust_aggregation:
        able = sorted(name for name, s in METHODS.items() if s.robust_aggregation)
        raise ConfigError(f"aggregation={cfg.aggregation!r}: {cfg.method}'s server does not average through "
                          f"the robust rules; methods that do: {', '.join(able)}.")
    if dp_settings(cfg) is not None:
        raise ConfigError(f"aggregation={cfg.aggregation!r} with {cfg.method}.dp-clip: the DP noise is sized "
                          "for the mean of clipped updates; use aggregation=mean under DP.")
    if dict(cfg.method_options).get(SECURE_AGGREGATION):
        raise ConfigError(f"aggregation={cfg.aggregation!r} with {cfg.method}.{SECURE_AGGREGATION}: the server "
                          "sees only the sum of the uploads; a robust rule needs each one.")
    if cfg.num_clients < 1:
        return  # the count is resolved later (fgl run), and parsed again then
    from fgl_flower.strategies.robust import needed
    from fgl_flower.strategies.sampling import sample_size

    fewest = sample_size(cfg.num_clients, cfg.fraction_train, cfg.min_train_clients) - cfg.accept_failures
    if fewest < (need := needed(cfg.aggregation, cfg.malicious_clients)):
        raise ConfigError(f"aggregation={cfg.aggregation!r} with malicious-clients={cfg.malicious_clients} needs "
                          f"{need} uploads a round, but a round may keep only {fewest} (the clients it samples "
                          "less accept-failures): lower malicious-clients or accept-failures, or add clients.")


def _check_secure_aggregation(cfg: RunConfig) -> None:
    """SecAgg+ sums over each round's clients: a round of one client has nothing to hide it in."""
    from fgl_flower.secagg.protocol import SECURE_AGGREGATION

    if not dict(cfg.method_options).get(SECURE_AGGREGATION) or cfg.num_clients < 1:
        return
    from fgl_flower.strategies.sampling import sample_size  # the server's package: only when needed

    per_round = sample_size(cfg.num_clients, cfg.fraction_train, cfg.min_train_clients)
    if per_round < 2:
        raise ConfigError(f"{cfg.method}.{SECURE_AGGREGATION} needs at least 2 clients in every round "
                          f"(this run samples {per_round}): raise num-clients, fraction-train or "
                          "min-train-clients.")
