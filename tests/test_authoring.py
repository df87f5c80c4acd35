"""The authoring kit: ``fgl new-method NAME`` in a copy of the checkout writes the method's own
files and nothing else by hand (the generated config and tables are rewritten), and the test
it writes passes as written."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fgl_flower.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
IGNORE = shutil.ignore_patterns(
    ".git",
    ".venv",
    "runs",
    "site",
    "__pycache__",
    "*.egg-info",
    "notebooks",
    "experiments",
    "results",
)


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.slow
def test_new_method_touches_only_its_own_files_and_its_test_passes(tmp_path):
    copy = tmp_path / "checkout"
    shutil.copytree(REPO, copy, ignore=IGNORE)
    before = tree(copy)
    env = {**os.environ, "PYTHONPATH": str(copy)}
    made = subprocess.run(
        [sys.executable, "-m", "fgl_flower.cli", "new-method", "fedstep"],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert made.returncode == 0, made.stdout + made.stderr
    after = tree(copy)
    added = sorted(set(after) - set(before))
    changed = sorted(k for k in set(after) & set(before) if after[k] != before[k])
    assert added == [
        "docs/methods/fedstep.md",
        "fgl_flower/clients/fedstep.py",
        "fgl_flower/methods/fedstep.py",
        "fgl_flower/strategies/fedstep.py",
        "tests/methods/test_fedstep.py",
    ]
    assert changed == [
        "README.md",
        "docs/methods/index.md",
        "pyproject.toml",
    ]  # generated parts only
    assert "[tool.flwr.app.config.fedstep]" in after["pyproject.toml"].decode()
    ruff = Path(sys.executable).parent / "ruff"
    if ruff.exists():  # the written code passes the lint gate as written
        for args in (["check"], ["format", "--check"]):
            linted = subprocess.run(
                [str(ruff), *args, *added[1:4], added[4]],
                cwd=copy,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert linted.returncode == 0, linted.stdout + linted.stderr
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/methods/test_fedstep.py",
        ],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-2000:]
    assert "3 passed" in ran.stdout
    # the checkout's pyproject carries the generated app config, the new method's included
    check = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from fgl_flower.app_defaults import "
            "sync_pyproject; t = open('pyproject.toml').read(); sys.exit(sync_pyproject(t) != t)",
        ],
        cwd=copy,
        env=env,
        timeout=120,
    )
    assert check.returncode == 0


def test_a_bad_or_taken_name_is_one_message(tmp_path):
    from fgl_flower.authoring import new_method

    with pytest.raises(ConfigError, match="lowercase letters and digits"):
        new_method("Fed-Step", tmp_path)
    with pytest.raises(ConfigError, match="exists already"):
        new_method("fedprox", tmp_path)
