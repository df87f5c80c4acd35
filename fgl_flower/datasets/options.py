"""Typed options for partitioners and generated datasets.

Options arrive from the run config as ``str -> scalar`` pairs. Each component
declares the options it accepts as :class:`Option` objects; :func:`resolve_options`
normalises names (case-insensitive, ``_`` and ``-`` equivalent), coerces types, fills
defaults and reports unknown names with suggestions.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass

from fgl_flower.errors import ConfigError

Scalar = str | int | float | bool


def norm_key(name: str) -> str:
    """Canonical spelling of an option name (``Num_Communities`` -> ``num-communities``)."""
    return str(name).strip().lower().replace("_", "-")


@dataclass(frozen=True)
class Option:
    """One accepted option: its type, default and a one-line description."""

    type: type
    default: Scalar | None
    doc: str

    def coerce(self, owner: str, name: str, value: Scalar) -> Scalar:
        """Convert ``value`` to :attr:`type` or raise :class:`ConfigError`."""
        try:
            if self.type is bool:
                if isinstance(value, str):
                    low = value.strip().lower()
                    if low not in {"true", "false", "1", "0", "yes", "no"}:
                        raise ValueError(value)
                    return low in {"true", "1", "yes"}
                return bool(value)
            if self.type is int and isinstance(value, float) and not value.is_integer():
                raise ValueError(value)
            return self.type(value)
        except (TypeError, ValueError):
            raise ConfigError(
                f"{owner}: option {name!r} must be {self.type.__name__}, got {value!r}."
            ) from None


def unknown_option_error(name: str, known: list[str], owner: str) -> ConfigError:
    """A :class:`ConfigError` for an unsupported option, with close matches."""
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    listing = ", ".join(sorted(known)) or "none"
    return ConfigError(f"Unknown option {name!r} for {owner}.{hint} Accepted: {listing}.")


def resolve_options(
    accepted: Mapping[str, Option], given: Mapping[str, Scalar], owner: str
) -> dict[str, Scalar | None]:
    """Defaults of ``accepted`` overridden by ``given`` (which must only use accepted names)."""
    out: dict[str, Scalar | None] = {k: o.default for k, o in accepted.items()}
    for raw_name, value in given.items():
        name = norm_key(raw_name)
        if name not in accepted:
            raise unknown_option_error(name, list(accepted), owner)
        out[name] = accepted[name].coerce(owner, name, value)
    return out


#: Options of every node dataset of the catalog (``data.<option>`` in the run config).
NODE_OPTIONS = {
    "undirected": Option(
        bool,
        False,
        "add the reverse of every edge (the directed WebKB graphs, S2FGL spec §9 item 15; "
        "ogbn-arxiv)",
    ),
}
