"""Search spaces: what a study varies, written as text and checked before any trial.

A space maps run-config keys to a :class:`Range` or a :class:`Choice`, each written as one
short text (in a method's spec, on the command line and in experiment files alike):

==================  =============================================================
``0.001..0.3:log``  a range, sampled on a log scale (``0.1..0.9``: uniformly); the
                    key's type decides whether it is a float or an integer range
                    (``local-epochs = "1..10"`` draws integers)
``0,1e-4,5e-4``     a choice among the listed values (typed as the key)
``none``            (an override only) leave the key out of the study
==================  =============================================================

A study's space is :data:`SHARED_SPACE` (the keys every method trains with, the same space
for every method of a comparison) plus the method's own ``space`` (its
:class:`~fgl_flower.methods.spec.MethodSpec`, keys relative to the method: ``mu`` is
``fedprox.mu``; ``graph:eps1``: only on graph-level data), then the user's overrides.
:func:`check_space` refuses, with one line,
an unknown key, a key that decides what is measured, an empty range and any value the
method's own checks refuse.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fgl_flower.errors import ConfigError

Scalar = int | float | bool | str

#: The keys every method trains with, as a comparison varies them for every method.
SHARED_SPACE: dict[str, str] = {
    "lr": "0.001..0.3:log",
    "weight-decay": "0,1e-5,1e-4,5e-4,1e-3",
    "local-epochs": "1..10",
    "dropout": "0.0..0.7",
}

#: Keys a study never varies: they decide what is measured (the data, its split and
#: partition, the rounds, the selection metric), or where and how the run goes.
FIXED_KEYS = frozenset(
    {
        "method",
        "dataset",
        "task",
        "partition",
        "num-clients",
        "num-rounds",
        "seed",
        "partition-seed",
        "split",
        "split-mode",
        "split-seed",
        "split-fold",
        "edge-flip",
        "select-by",
        "eval-weight",
        "eval-dropout",
        "out-dir",
        "data-root",
        "device",
        "progress",
        "resume",
        "checkpoint-every",
        "checkpoint-dir",
        "cpus-per-client",
        "gpus-per-client",
        "malicious-clients",
        "untrained-classes",
        "on-nonfinite",
        "round-timeout",
    }
)

#: An override that leaves a key out of the study.
DROP = "none"
#: Data levels a space key may be limited to (``graph:gcfl.eps1``).
LEVELS = ("node", "graph")


@dataclass(frozen=True)
class Range:
    """Values from ``low`` to ``high`` (both included), on a log scale if ``log``;
    integers if ``integer``."""

    low: float
    high: float
    log: bool = False
    integer: bool = False

    def suggest(self, trial: Any, key: str) -> Scalar:
        """The value an Optuna ``trial`` draws for ``key``."""
        if self.integer:
            return trial.suggest_int(key, int(self.low), int(self.high), log=self.log)
        return trial.suggest_float(key, self.low, self.high, log=self.log)

    def values(self) -> tuple[Scalar, ...]:
        """The values that stand for the range when the method checks it: its ends."""
        cast = int if self.integer else float
        return cast(self.low), cast(self.high)

    def __str__(self) -> str:
        return f"{self.low:g}..{self.high:g}" + (":log" if self.log else "")


@dataclass(frozen=True)
class Choice:
    """One of ``options``."""

    options: tuple[Scalar, ...]

    def suggest(self, trial: Any, key: str) -> Scalar:
        return trial.suggest_categorical(key, list(self.options))

    def values(self) -> tuple[Scalar, ...]:
        return self.options

    def __str__(self) -> str:
        return ",".join(_text(v) for v in self.options)


Param = Range | Choice


def _text(value: Scalar) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float) else str(value)


def parse_param(key: str, text: str, typ: type) -> Param:
    """The :class:`Range` or :class:`Choice` that ``text`` writes for a key of type ``typ``
    (see the module docstring); :class:`ConfigError` naming ``key`` otherwise."""
    from fgl_flower.config import coerce_value

    text = str(text).strip()
    where = f"--space {key}={text}"
    if ".." in text:
        if typ not in (int, float):
            raise ConfigError(
                f"{where}: {key} takes {typ.__name__} values, which have no range; "
                "list the choices instead (a,b,c)."
            )
        body, _, scale = text.partition(":")
        if scale not in ("", "log"):
            raise ConfigError(f"{where}: the only scale is ':log' (got ':{scale}').")
        low_text, _, high_text = body.partition("..")
        low, high = (coerce_value(where, v.strip(), typ) for v in (low_text, high_text))
        if not low < high:
            raise ConfigError(f"{where}: an empty range; write it low..high with low < high.")
        if scale == "log" and low <= 0:
            raise ConfigError(f"{where}: a log scale needs low > 0 (use a choice to add 0).")
        if not all(math.isfinite(v) for v in (low, high)):
            raise ConfigError(f"{where}: give finite ends.")
        return Range(low, high, log=scale == "log", integer=typ is int)
    options = tuple(coerce_value(where, v.strip(), typ) for v in text.split(",") if v.strip())
    if len(set(options)) < 2:
        raise ConfigError(
            f"{where}: a study varies a key over two values or more (low..high or a,b); "
            f"fix one value with --set {key}=VALUE instead."
        )
    if len(set(options)) != len(options):
        raise ConfigError(f"{where}: a value is listed twice.")
    return Choice(options)


def study_space(method: str, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """The space of a study of ``method`` as text, full keys: :data:`SHARED_SPACE`, the
    method's declared ``space``, then ``overrides`` (``none`` drops a key). A method that
    declares none (``space=None``) is tuned over ``overrides`` alone."""
    from fgl_flower.methods import METHODS

    spec = METHODS.get(method)
    if spec.space is None and not overrides:
        raise ConfigError(
            f"Method {spec.name!r} declares no search space (MethodSpec.space); give every "
            "key to vary with --space KEY=RANGE, or declare one in its spec."
        )
    space = {} if spec.space is None else {**SHARED_SPACE, **method_space(spec)}
    for key, text in (overrides or {}).items():
        if str(text).strip() == DROP:
            space.pop(key, None)
        else:
            space[key] = str(text)
    if not space:
        raise ConfigError("The study varies nothing: give --space KEY=RANGE.")
    return space


def run_space(
    overrides: Mapping[str, Any], space: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The space of a study of the run that ``overrides`` give (run-config keys): its
    method's :func:`study_space` with ``space`` applied, for the level of its data (keys
    limited to another level left out, the prefix of the others dropped)."""
    from fgl_flower.launch import flat_config, task_of_run

    flat = flat_config(dict(overrides))
    return for_level(study_space(str(flat["method"]), space), task_of_run(flat).level)


def method_space(spec: Any) -> dict[str, str]:
    """A method's declared space (its :class:`~fgl_flower.methods.spec.MethodSpec`) with
    run-config keys, a level kept in front (gcfl's ``graph:eps1`` is ``graph:gcfl.eps1``)."""
    out = {}
    for option, text in (spec.space or {}).items():
        level, sep, name = option.rpartition(":")
        out[f"{level}{sep}{spec.name}.{name}"] = text
    return out


def for_level(space: Mapping[str, str], level: str) -> dict[str, str]:
    """``space`` for a run on ``level`` data: a key written ``node:KEY`` or ``graph:KEY``
    (a method whose options differ by data level) only on that level, without the prefix."""
    out = {}
    for key, text in space.items():
        scope, sep, bare = key.rpartition(":")
        if sep and scope not in LEVELS:
            raise ConfigError(f"--space {key}: a level prefix is one of {', '.join(LEVELS)}.")
        if not sep or scope == level:
            out[bare] = text
    return out


def check_space(space: Mapping[str, str], base: Mapping[str, Scalar]) -> dict[str, Param]:
    """``space`` parsed against the flat run config ``base`` (the untuned run): every key a
    run-config key of this run and not in :data:`FIXED_KEYS`, every range non-empty, and
    every value the run's checks accept (a range by its two ends, a choice value by value),
    so that no trial fails on its configuration. One :class:`ConfigError` otherwise."""
    from fgl_flower.launch import task_of_run, typed
    from fgl_flower.methods import METHODS
    from fgl_flower.parse import parse_run_config

    method = METHODS.get(str(base["method"])).name
    params: dict[str, Param] = {}
    for key, text in for_level(space, task_of_run(base).level).items():
        if key in FIXED_KEYS or key.startswith("data."):
            raise ConfigError(
                f"--space {key}: {key} decides what the study measures (or where it runs), "
                "so every trial keeps the run's value; set it with --set."
            )
        owner = key.split(".", 1)[0]
        if "." in key and owner in METHODS and METHODS.get(owner).name != method:
            raise ConfigError(
                f"--space {key}: an option of method {owner!r}, but the study tunes {method!r}."
            )
        typed(key, base.get(key), base, "--space ")  # an unknown key: its closest known keys
        param = parse_param(key, text, type(base[key]))
        for value in param.values():
            try:
                parse_run_config({**base, key: value})
            except ConfigError as e:
                raise ConfigError(f"--space {key}={text}: the run refuses {key}={value!r}: {e}")
        params[key] = param
    return params
