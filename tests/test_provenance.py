"""Which code made a run."""

import re
import subprocess
from pathlib import Path

import fgl_flower
from fgl_flower.provenance import code_version


def test_code_version_names_the_commit_of_this_checkout():
    version = code_version()
    assert version.startswith(fgl_flower.__version__)
    root = Path(fgl_flower.__file__).resolve().parent.parent
    if (root / ".git").exists():  # run from a checkout: the commit (and whether it is changed)
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        assert re.fullmatch(rf"{re.escape(fgl_flower.__version__)}\+{head}(\.dirty)?", version)


def test_outside_a_checkout_it_is_the_package_version(monkeypatch):
    from fgl_flower import provenance

    monkeypatch.setattr(provenance, "_git", lambda root, *args: None)
    assert code_version() == fgl_flower.__version__
