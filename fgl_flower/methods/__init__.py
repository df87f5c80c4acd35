"""The method registry: every method's :class:`~fgl_flower.methods.spec.MethodSpec`, collected.

A method is its spec (``methods/<m>.py``, torch-free, ending in ``SPEC = MethodSpec(...)``),
its server (``strategies/<m>.py``), its client (``clients/<m>.py``) and, if it has one, its
model (``models/<m>.py``); nothing else lists it. The registry finds the specs itself:

- every module of this package (``spec`` aside) is one method and must define ``SPEC``;
- a method in another installed package registers itself through the entry point group
  :data:`ENTRY_POINT_GROUP` (``pyproject.toml``: ``[project.entry-points."fgl_flower.methods"]
  mymethod = "my_package.spec:SPEC"``);
- a method defined at run time (a notebook) calls :func:`register_method`.

Specs name their strategy and client as ``"module:Class"`` strings, imported on first use:
looking a method up, validating a config or loading the ClientApp imports no method's code
(nor torch), and a message imports only its own method.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import replace
from importlib.metadata import entry_points
from types import MappingProxyType

from fgl_flower.errors import ConfigError
from fgl_flower.methods.spec import MethodSpec, Scalar
from fgl_flower.registry import Registry

__all__ = [
    "ENTRY_POINT_GROUP",
    "METHODS",
    "MethodSpec",
    "method_option_defaults",
    "register_method",
]

#: Entry point group through which other installed packages add methods.
ENTRY_POINT_GROUP = "fgl_flower.methods"

METHODS: Registry[MethodSpec] = Registry("method")


def register_method(spec: MethodSpec, *, replace_existing: bool = False) -> MethodSpec:
    """Register ``spec`` with its options frozen (read-only mapping).

    Methods registered at run time (e.g. defined in a notebook, with classes rather than
    ``"module:Class"`` paths) run in-process; ``replace_existing`` re-registers a name (a
    notebook cell run twice)."""
    if not isinstance(spec, MethodSpec):
        raise TypeError(f"register_method needs a MethodSpec, got {type(spec).__name__}")
    frozen = replace(spec, options=MappingProxyType(dict(spec.options)))
    METHODS.register(spec.name, frozen, replace=replace_existing)
    return frozen


def method_option_defaults() -> dict[str, Scalar]:
    """``<method>.<option>`` -> default of every registered method's options."""
    return {f"{name}.{k}": v for name, spec in METHODS.items() for k, v in spec.options.items()}


def builtin_specs() -> list[MethodSpec]:
    """The ``SPEC`` of every module of this package (``spec`` aside), by module name."""
    specs = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name == "spec":
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        spec = getattr(module, "SPEC", None)
        if not isinstance(spec, MethodSpec):
            raise TypeError(
                f"{module.__name__} defines no SPEC = MethodSpec(...): every module of "
                "fgl_flower.methods is one method's spec"
            )
        specs.append(spec)
    return specs


def installed_specs() -> list[tuple[str, MethodSpec]]:
    """``(entry point, spec)`` of the methods other installed packages register through
    :data:`ENTRY_POINT_GROUP`; an entry point that does not load to a spec stops with a
    message naming it."""
    out = []
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        where = f"entry point {ep.name} = {ep.value!r} (group {ENTRY_POINT_GROUP})"
        try:
            spec = ep.load()
        except Exception as e:  # a broken third-party package must say which one
            raise ConfigError(f"{where} failed to load: {type(e).__name__}: {e}") from e
        if not isinstance(spec, MethodSpec):
            raise ConfigError(f"{where} is a {type(spec).__name__}, not a MethodSpec.")
        out.append((f"{ep.name} = {ep.value}", spec))
    return out


def _register_all() -> None:
    for spec in builtin_specs():
        register_method(spec)
    for where, spec in installed_specs():
        if spec.name in METHODS:
            raise ConfigError(f"{where}: a method named {spec.name!r} exists already; rename it.")
        register_method(spec)


_register_all()
