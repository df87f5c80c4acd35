"""A tiny name-to-object registry with helpful errors.

Every pluggable family (methods, datasets, partitioners, models) is a :class:`Registry`,
so adding one means registering it; nothing in the core dispatches on names.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from fgl_flower.errors import UnknownNameError

T = TypeVar("T")


def import_object(ref: Any) -> Any:
    """The object named by ``ref = "package.module:attribute"``, imported on first use.

    Registries name their heavy entries this way (a method's strategy and client, a
    model class), so that looking a name up, validating a config or loading the
    ClientApp imports nothing that the message at hand does not need. Any other value
    (e.g. a class registered at run time) is returned unchanged.
    """
    if not isinstance(ref, str):
        return ref
    module, sep, attr = ref.partition(":")
    if not sep:
        raise ValueError(f"{ref!r} is not a 'package.module:attribute' reference")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _norm(name: str) -> str:
    return name.strip().lower().replace("_", "-")


class Registry(Generic[T]):
    """Maps case-insensitive names (``_`` and ``-`` equivalent) to objects.

    Args:
        kind: What is registered, used in error messages (e.g. ``"method"``).
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self._names: dict[str, str] = {}  # normalized -> canonical spelling

    def register(
        self, name: str, obj: T | None = None, *, replace: bool = False
    ) -> Callable[[T], T] | T:
        """Register ``obj`` under ``name``; usable as a decorator when ``obj`` is omitted.
        A name taken already is an error unless ``replace`` (e.g. a notebook cell run twice)."""

        def _add(o: T) -> T:
            key = _norm(name)
            if key in self._items and not replace:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._items[key] = o
            self._names[key] = name
            return o

        return _add if obj is None else _add(obj)

    def get(self, name: str) -> T:
        """Look up ``name``, raising :class:`UnknownNameError` with suggestions."""
        key = _norm(str(name))
        if key in self._items:
            return self._items[key]
        known = sorted(self._names.values())
        close = difflib.get_close_matches(key, list(self._items), n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(repr(self._names[c]) for c in close)}?" if close else ""
        raise UnknownNameError(
            f"Unknown {self.kind} {name!r}.{hint} Known {self.kind}s: {', '.join(known)}."
        )

    def canonical(self, name: str) -> str:
        """The registered spelling of ``name`` (raises like :meth:`get`)."""
        self.get(name)
        return self._names[_norm(name)]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and _norm(name) in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._names.values()))

    def items(self) -> list[tuple[str, T]]:
        return [(self._names[k], self._items[k]) for k in sorted(self._items, key=self._names.get)]

    def __len__(self) -> int:
        return len(self._items)
