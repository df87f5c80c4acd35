"""Pack what a lent GPU machine lacks into ``.device-kit/``, for ``gpu_session.sh`` there.

The lent machines (``/work/.library/device``) run an image with Python 3.12, PyTorch (CUDA),
PyG, NumPy, SciPy, scikit-learn and the test tools, but no Flower and no Ray, and nothing can
be fetched there. Each call sends the repository and at most 64 MiB. This script, run here
with the venv active and the package index reachable, writes (git-ignored):

- ``.device-kit/site.tar.xz``: Flower (with Ray, trimmed of its Java jar and dashboard web
  build), PyG, pymetis, python-louvain and every other dependency that the image does not
  provide, at this venv's versions, installed for CPython 3.12 on x86-64 Linux;
- ``.device-kit/data-coauthor/``: Coauthor CS and Physics and FedSpray's Physics partition
  (the CPU-against-CUDA runs).

It prints the sizes and the two device calls that use them (``gpu_session.sh``). The
package was checked on a stand-in for the image here (CPython 3.12 with PyTorch, NumPy, SciPy,
scikit-learn and pytest installed, the archive unpacked by ``gpu_session.sh setup``): a Ray
simulation ran. Taken from
the image, never carried: the packages of :data:`FROM_IMAGE` (large and bound to its
PyTorch/NumPy build) and ``uv`` (Flower runs it only to install an app's dependencies, which
``FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1`` turns off).

Run from the repository root::

    FGL_DATA_ROOT=../shared/data python experiments/platform/device_kit.py
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
KIT = REPO / ".device-kit"
#: What the device call sends at most (tracked files, untracked ones, carried paths).
CALL_LIMIT = 64 * 2**20
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64",
             "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64", "manylinux_2_5_x86_64"]
TARGET = ["--python-version", "3.12", "--implementation", "cp", "--abi", "cp312",
          *[arg for p in PLATFORMS for arg in ("--platform", p)], "--only-binary=:all:"]
#: Distributions carried at this venv's version (their dependencies follow).
CARRIED = ["flwr[simulation,dp]", "torch-geometric", "pymetis", "pathspec", "tomli-w"]
#: Built here as a wheel (no wheel on the index).
SOURCE_ONLY = ["python-louvain"]
#: The image's own (normalised names): compiled against its PyTorch/NumPy, or large.
FROM_IMAGE = {"torch", "numpy", "scipy", "scikit-learn", "networkx", "matplotlib", "pillow",
              "sympy", "contourpy", "kiwisolver", "fonttools", "psutil", "tqdm", "uv"}
#: Parts of Ray that Flower's simulation never loads: the Java jar, the dashboard's web build
#: and the libraries on top of Ray core (a simulation with these removed ran here).
RAY_TRIM = ["ray/jars", "ray/dashboard/client/build", "ray/rllib", "ray/serve", "ray/tune",
            "ray/train", "ray/llm", "ray/data"]
DATA = {"data-coauthor": ["Coauthor/CS", "Coauthor/Physics"]}


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "-q", *args], check=True)


def wheel_name(path: Path) -> str:
    return normalise(path.name.split("-")[0])


def build_site(work: Path) -> Path:
    """Download the closure of :data:`CARRIED` for the target, drop :data:`FROM_IMAGE`,
    install the rest into ``work/site`` and trim Ray."""
    wheels = work / "wheels"
    specs = [f"{name}=={md.version(name.split('[')[0])}" for name in CARRIED]
    for name in SOURCE_ONLY:
        pip("wheel", "--no-deps", "-w", str(wheels), f"{name}=={md.version(name)}")
    local = sorted(wheels.glob("*.whl"))
    pip("download", "-d", str(wheels), *TARGET, *specs, *map(str, local))
    keep = [w for w in sorted(wheels.glob("*.whl")) if wheel_name(w) not in FROM_IMAGE]
    site = work / "site"
    pip("install", "--no-deps", "--no-compile", "--target", str(site), *TARGET, *map(str, keep))
    for part in RAY_TRIM:
        shutil.rmtree(site / part, ignore_errors=True)
    return site


def pack(site: Path, dest: Path) -> None:
    tmp = dest.with_suffix(".part")
    with tarfile.open(tmp, "w:xz", preset=6) as tar:
        tar.add(site, arcname="site")
    os.replace(tmp, dest)


def copy_data(root: Path) -> dict[str, int]:
    sizes = {}
    for name, folders in DATA.items():
        dest = KIT / name
        shutil.rmtree(dest, ignore_errors=True)
        for folder in folders:
            src = root / folder
            if not src.is_dir():
                sys.exit(f"{src} is missing: set FGL_DATA_ROOT to the folder with the raw datasets.")
            shutil.copytree(src, dest / folder, ignore=shutil.ignore_patterns("processed"))
        if name == "data-coauthor":
            partition = root.parent / "fedspray_partition"
            if not partition.is_dir():
                sys.exit(f"{partition} is missing: FedSpray's Physics partition is read from beside the data.")
            shutil.copytree(partition, dest / "fedspray_partition")
        sizes[name] = sum(f.stat().st_size for f in dest.rglob("*") if f.is_file())
    return sizes


def tree_size() -> int:
    """Bytes of the files a call sends besides what it carries (tracked and untracked)."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split("\0")
    return sum((REPO / f).stat().st_size for f in files if f and (REPO / f).is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-root", default=os.environ.get("FGL_DATA_ROOT", str(REPO.parent / "shared" / "data")))
    ap.add_argument("--skip-site", action="store_true", help="keep an existing site.tar.xz")
    args = ap.parse_args()
    KIT.mkdir(exist_ok=True)
    archive = KIT / "site.tar.xz"
    if not (args.skip_site and archive.exists()):
        with tempfile.TemporaryDirectory() as work:
            pack(build_site(Path(work)), archive)
    sizes = copy_data(Path(args.data_root).resolve())
    tree = tree_size()
    mib = 2**20
    print(f"repository files sent with every call: {tree / mib:.1f} MiB")
    print(f"site.tar.xz: {archive.stat().st_size / mib:.1f} MiB")
    for name, size in sizes.items():
        print(f"{name}: {size / mib:.1f} MiB")
    calls = {"setup": ["site.tar.xz"], "methods": ["data-coauthor"]}
    for stage, paths in calls.items():
        total = tree + sum((KIT / p).stat().st_size if (KIT / p).is_file() else sizes[p] for p in paths)
        status = "fits" if total <= CALL_LIMIT else "OVER the 64 MiB a call sends"
        carry = ", ".join(f'".device-kit/{p}"' for p in paths)
        print(f"call `{stage}`: carry [{carry}], command `bash experiments/platform/gpu_session.sh {stage}`"
              f" ({total / mib:.1f} MiB, {status})")


if __name__ == "__main__":
    main()
