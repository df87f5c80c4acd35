"""``fgl new-method NAME``: a runnable method written from a template, in a source checkout.

The template is a FedAvg variant with one option and one probe, so that every piece a method
has is there to be edited: its spec (``methods/<name>.py``: options, check, probe), its server
(``strategies/<name>.py``), its client (``clients/<name>.py``), its test
(``tests/methods/test_<name>.py``, passing as written) and its page (``docs/methods/<name>.md``).
The generated parts of ``pyproject.toml`` and of the methods tables are then rewritten from the
registry (:mod:`fgl_flower.app_defaults`, :mod:`fgl_flower.tables`); nothing is edited by hand.

The method it writes: FedAvg with a server learning rate :math:`\\eta` (FedOpt's server step
with plain SGD),

.. math::
    w^{t+1} = w^{t} + \\eta\\,\\Big(\\sum_k \\tfrac{n_k}{n}\\, w_k^{t} - w^{t}\\Big),

which is FedAvg at :math:`\\eta = 1`; its probe is the size of the server's step.
"""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import resources
from pathlib import Path
from string import Template

from fgl_flower.errors import ConfigError

#: A method name the kit accepts: a Python module name that is also a run-config scope.
NAME = re.compile(r"^[a-z][a-z0-9]{1,30}$")

#: The template files (``fgl_flower/templates/*.tmpl``, :class:`string.Template` with
#: ``${name}`` and ``${cls}``), formatted as the lint gate wants them, and where each goes.
TEMPLATES = {
    "spec.py.tmpl": "fgl_flower/methods/{name}.py",
    "strategy.py.tmpl": "fgl_flower/strategies/{name}.py",
    "client.py.tmpl": "fgl_flower/clients/{name}.py",
    "test.py.tmpl": "tests/methods/test_{name}.py",
    "page.md.tmpl": "docs/methods/{name}.md",
}


def checkout_root() -> Path:
    """The source checkout this package is imported from (where a new method's files go)."""
    from fgl_flower.app_defaults import GENERATED_MARK

    root = Path(__file__).resolve().parents[1]
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file() or GENERATED_MARK not in pyproject.read_text():
        raise ConfigError(
            "fgl new-method writes into a source checkout of fgl-flower (git clone, pip install -e .); "
            "this one is installed. A method in your own package registers through the entry point "
            "group fgl_flower.methods (docs/methods/authoring.md)."
        )
    return root


def new_method(name: str, root: Path | None = None) -> list[Path]:
    """Write the method ``name`` from the template into the checkout ``root``, then rewrite the
    generated config and tables; returns the files written."""
    from fgl_flower.methods import METHODS

    if not NAME.match(name):
        raise ConfigError(
            f"method name {name!r}: use 2-31 lowercase letters and digits, starting "
            "with a letter (it names modules and the run-config scope)."
        )
    if name in METHODS:
        raise ConfigError(f"a method named {name!r} exists already; choose another name.")
    root = checkout_root() if root is None else root
    fields = {"name": name, "cls": name[0].upper() + name[1:]}
    templates = resources.files("fgl_flower").joinpath("templates")
    files = {root / where.format(name=name): template for template, where in TEMPLATES.items()}
    taken = [p for p in files if p.exists()]
    if taken:
        raise ConfigError(f"{taken[0]} exists already; choose another name or remove it.")
    for path, template in files.items():
        text = Template(templates.joinpath(template).read_text(encoding="utf-8")).substitute(fields)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    # the registry is built at import: regenerate in a fresh interpreter that sees the new spec
    for argv in (
        ["fgl_flower.app_defaults", "--write", str(root / "pyproject.toml")],
        [
            "fgl_flower.tables",
            "--write",
            str(root / "README.md"),
            str(root / "docs" / "methods" / "index.md"),
        ],
    ):
        subprocess.run([sys.executable, "-m", *argv], cwd=root, check=True, capture_output=True)
    return list(files)
