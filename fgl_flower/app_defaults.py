"""The app's run config: every key with its default and meaning, from their one source.

The core keys (every run has them) are written once in ``fgl_flower/run_config.toml``; a
method's options are written once in its spec (``methods/<m>.py``: ``options`` and
``option_help``). Flower needs them all as ``[tool.flwr.app.config]`` of a ``pyproject.toml``:
:func:`app_config_text` makes that table from the two sources, and :func:`app_pyproject_text`
the whole ``pyproject.toml`` of the Flower app that ``fgl run`` stages (:mod:`fgl_flower.paths`),
so an installed wheel runs as a source checkout does. The checkout's own ``pyproject.toml``
carries the same table (for ``flwr run .``), rewritten by ``python -m fgl_flower.app_defaults
--write pyproject.toml`` and checked by a test.

:func:`load_app_defaults` flattens the table to the dotted keys of Flower's run config
(``fedprox.mu``, ``data.synthetic.num-nodes``); :func:`describe_keys` pairs each key with its
default and meaning (``fgl config``).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from importlib import resources
from typing import Any

from fgl_flower.config import CHOICES, Scalar

#: What the app bundle (FAB) holds: the package's Python and TOML files.
FAB_INCLUDE = ("fgl_flower/**/*.py", "fgl_flower/**/*.toml")

#: The Flower app's fixed tables (publisher, what the bundle holds, the two components).
APP_TABLES = f"""\
[tool.flwr.app]
publisher = "fgl-flower"
# The app bundle (FAB) that every SuperNode unpacks for each message: the package only,
# not the tests, docs and experiments.
fab-include = [{", ".join(f'"{p}"' for p in FAB_INCLUDE)}]

[tool.flwr.app.components]
serverapp = "fgl_flower.server_app:app"
clientapp = "fgl_flower.client_app:app"
"""

#: The first line of the generated part of the checkout's ``pyproject.toml``.
GENERATED_MARK = "# --- Flower app (generated from fgl_flower/run_config.toml and the method specs"


def read_toml(path) -> dict[str, Any]:
    """Parse a TOML file."""
    with open(path, "rb") as f:
        return tomllib.load(f)


def _toml_value(value: Scalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def core_config_text() -> str:
    """``run_config.toml`` (the core keys), its tables moved under ``tool.flwr.app.config``."""
    text = resources.files("fgl_flower").joinpath("run_config.toml").read_text(encoding="utf-8")
    return re.sub(r"^\[([\w.-]+)\]", r"[tool.flwr.app.config.\1]", text, flags=re.M)


def method_config_text() -> str:
    """One ``[tool.flwr.app.config.<method>]`` table per registered method with options:
    each option's default from its spec, its meaning as the comment."""
    from fgl_flower.methods import METHODS

    blocks = []
    for name, spec in METHODS.items():
        if not spec.options:
            continue
        head = f"[tool.flwr.app.config.{name}]" + (
            f"  # {spec.config_note}" if spec.config_note else ""
        )
        rows = [f"{key} = {_toml_value(value)}" for key, value in spec.options.items()]
        width = max(len(r) for r in rows) + 2
        lines = [head] + [
            f"{row:{width}}# {spec.option_help.get(key, '')}".rstrip()
            for row, key in zip(rows, spec.options)
        ]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def app_config_text() -> str:
    """The whole ``[tool.flwr.app]`` part of the app's ``pyproject.toml``."""
    return (
        f"{GENERATED_MARK}; python -m fgl_flower.app_defaults --write pyproject.toml) ---\n"
        "# Every key below can be overridden per run:\n"
        "#   flwr run . --run-config \"method='fedprox' fedprox.mu=0.1\"   or   "
        "fgl run --set key=value\n"
        f"{APP_TABLES}\n[tool.flwr.app.config]\n{core_config_text().rstrip()}\n\n"
        f"{method_config_text()}"
    )


def app_pyproject_text() -> str:
    """A complete ``pyproject.toml`` for the staged Flower app: the installed distribution's
    name, version and dependencies, then :func:`app_config_text`."""
    from importlib import metadata

    try:
        dist = metadata.distribution("fgl-flower")
        version, requires = dist.version, dist.requires or []
    except metadata.PackageNotFoundError:  # the package imported from a folder, not installed
        version, requires = "0.0.0", []
    deps = [r for r in requires if "extra ==" not in r]
    dep_lines = "".join(f"    {_toml_value(d)},\n" for d in deps)
    return (
        "[project]\n"
        'name = "fgl-flower"\n'
        f"version = {_toml_value(version)}\n"
        'description = "Federated graph learning methods as Flower strategies and clients"\n'
        'license = "Apache-2.0"\n'
        f"dependencies = [\n{dep_lines}]\n\n" + app_config_text()
    )


def load_app_defaults(text: str | None = None) -> dict[str, Scalar]:
    """The app's ``[tool.flwr.app.config]`` defaults (of ``text``, default
    :func:`app_config_text`), flattened to dotted keys as Flower does."""
    text = app_config_text() if text is None else text
    return _flatten(tomllib.loads(text)["tool"]["flwr"]["app"]["config"])


def describe_keys() -> list[tuple[str, Scalar, str]]:
    """``(key, default, meaning)`` of every run-config key, core keys first; the meaning is
    the key's comment in the app config, plus its choices."""
    text = app_config_text()
    defaults = load_app_defaults(text)
    section, meanings = None, {}
    for line in text.splitlines():
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


def sync_pyproject(text: str) -> str:
    """``text`` (a checkout's ``pyproject.toml``) with everything from the generated mark on
    replaced by :func:`app_config_text`."""
    head, mark, _ = text.partition(GENERATED_MARK)
    if not mark:
        raise ValueError(f"no line starting {GENERATED_MARK!r} in the pyproject.toml given")
    return head + app_config_text()


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Scalar]:
    out: dict[str, Scalar] = {}
    for k, v in d.items():
        if isinstance(v, Mapping):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m fgl_flower.app_defaults [--write PATH]``: print the app config, or rewrite
    the generated part of the ``pyproject.toml`` at ``PATH``."""
    import argparse
    from pathlib import Path

    p = argparse.ArgumentParser(prog="python -m fgl_flower.app_defaults", description=main.__doc__)
    p.add_argument("--write", metavar="PATH", help="pyproject.toml whose generated part to rewrite")
    args = p.parse_args(argv)
    if not args.write:
        print(app_config_text(), end="")
        return 0
    path = Path(args.write)
    new = sync_pyproject(path.read_text())
    if new != path.read_text():
        path.write_text(new)
        print(f"rewrote the Flower app config in {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
