"""The app's defaults: ``[tool.flwr.app.config]`` of ``pyproject.toml``, as Flower reads it.

:func:`load_app_defaults` flattens the table to the dotted keys of Flower's run config
(``fedprox.mu``, ``data.synthetic.num-nodes``); :func:`describe_keys` pairs each key with
its default and the comment beside it in ``pyproject.toml`` (the one list of keys, shown by
``fgl config``).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from typing import Any

from fgl_flower.config import CHOICES, Scalar


def read_toml(path) -> dict[str, Any]:
    """Parse a TOML file."""
    with open(path, "rb") as f:
        return tomllib.load(f)


def load_app_defaults() -> dict[str, Scalar]:
    """The app's ``[tool.flwr.app.config]`` defaults, flattened to dotted keys as Flower does."""
    from fgl_flower.paths import app_dir

    return _flatten(read_toml(app_dir() / "pyproject.toml")["tool"]["flwr"]["app"]["config"])


def describe_keys() -> list[tuple[str, Scalar, str]]:
    """``(key, default, meaning)`` of every run-config key, in ``pyproject.toml``'s order;
    the meaning is the key's comment there (the one list of keys), plus its choices."""
    import re

    from fgl_flower.paths import app_dir

    defaults = load_app_defaults()
    section, meanings = None, {}
    for line in (app_dir() / "pyproject.toml").read_text().splitlines():
        if m := re.match(r"\[tool\.flwr\.app\.config(?:\.([\w.-]+))?\]", line.strip()):
            section = m.group(1) or ""
            continue
        if line.startswith("["):  # a table outside the app config
            section = None
        if section is None:
            continue
        if m := re.match(r"\s*([\w-]+)\s*=\s*[^#]*?(?:#\s*(.*))?$", line):
            key = f"{section}.{m.group(1)}" if section else m.group(1)
            meanings[key] = (m.group(2) or "").strip()
    rows = []
    for key, default in defaults.items():
        meaning = meanings.get(key, "")
        if key in CHOICES and not all(c in meaning for c in CHOICES[key][0]):
            meaning = f"{meaning} [{' | '.join(CHOICES[key][0])}]".strip()
        rows.append((key, default, meaning))
    return rows


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Scalar]:
    out: dict[str, Scalar] = {}
    for k, v in d.items():
        if isinstance(v, Mapping):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out
