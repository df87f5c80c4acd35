"""Pack what a lent GPU machine lacks into ``.device-kit/``, for ``gpu_session.sh`` there.

The lent machines (``/work/.library/device``) run an image with Python 3.12, PyTorch (CUDA),
PyG, NumPy, SciPy, scikit-learn and the test tools, but no Flower and no Ray, and nothing can
be fetched there. Each call sends the repository and at most 64 MiB. This script, run here
with the venv active and the package index reachable, writes (git-ignored):

- ``.device-kit/site-base.tar.xz``: Flower, PyG, pymetis, python-louvain and those of their
  dependencies that the image lacks or Flower pins, at this venv's versions (``pip freeze``),
  installed for CPython 3.12 on x86-64 Linux; on the path there they come before the image's
  own copies;
- ``.device-kit/site-ray.tar.xz``: Ray, without its Java jar, its dashboard's web build and
  the libraries on top of Ray core (Flower's simulation loads none of them; a simulation
  with them removed ran here);
- ``.device-kit/data-coauthor/``: Coauthor CS and Physics (raw files) and FedSpray's Physics
  partition.

It prints the sizes and the two device calls (``gpu_session.sh setup`` carries both archives,
``methods`` the base archive and the data; each call stands alone). Taken from the image,
never carried: the packages of :data:`FROM_IMAGE` (large, bound to its PyTorch/NumPy build,
or utilities) and ``uv`` (Flower runs it only to install an app's dependencies, which
``FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1`` turns off). The archives were checked on
a stand-in for the image here (CPython 3.12 with PyTorch, the test tools and the utilities
of :data:`FROM_IMAGE`, unpacked by ``gpu_session.sh``): a Ray simulation ran from the setup
archives, FedSpray on Physics in-process from the base archive and the data.

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
PLATFORMS = [
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
    "manylinux_2_5_x86_64",
]
TARGET = [
    "--python-version",
    "3.12",
    "--implementation",
    "cp",
    "--abi",
    "cp312",
    *[arg for p in PLATFORMS for arg in ("--platform", p)],
    "--only-binary=:all:",
]
#: Distributions carried (their dependencies follow), all at this venv's versions.
CARRIED = ["flwr[simulation,dp]", "torch-geometric", "pymetis", "pathspec", "tomli-w"]
#: Built here as a wheel (no wheel on the index).
SOURCE_ONLY = ["python-louvain"]
#: The image's own (normalised names; its package list in the device tool's KINDS.md):
#: compiled against its PyTorch/NumPy or large, and general utilities that no number of a
#: run depends on (HTTP, YAML, templating, terminal output). Flower's own pins (protobuf,
#: grpcio, typer, pydantic, ...) are carried.
FROM_IMAGE = {
    "torch",
    "numpy",
    "scipy",
    "scikit-learn",
    "networkx",
    "matplotlib",
    "pillow",
    "sympy",
    "mpmath",
    "contourpy",
    "kiwisolver",
    "fonttools",
    "psutil",
    "tqdm",
    "uv",
    "aiohttp",
    "aiosignal",
    "aiohappyeyeballs",
    "frozenlist",
    "multidict",
    "propcache",
    "yarl",
    "uvloop",
    "anyio",
    "h11",
    "httpx",
    "httpcore",
    "requests",
    "urllib3",
    "idna",
    "charset-normalizer",
    "certifi",
    "pygments",
    "pyyaml",
    "rich",
    "markdown-it-py",
    "mdurl",
    "attrs",
    "filelock",
    "fsspec",
    "jinja2",
    "markupsafe",
    "packaging",
    "typing-extensions",
    "wrapt",
    "pyparsing",
}
#: Parts of Ray that Flower's simulation never loads.
RAY_TRIM = [
    "ray/jars",
    "ray/dashboard/client/build",
    "ray/rllib",
    "ray/serve",
    "ray/tune",
    "ray/train",
    "ray/llm",
    "ray/data",
]
#: What goes into the Ray archive (the rest of the site is the base archive).
RAY_PARTS = re.compile(r"^(ray|ray-[^/]*\.dist-info|bin/ray|bin/serve|bin/tune)(/|$)")
CALLS = {
    "setup": ["site-base.tar.xz", "site-ray.tar.xz"],
    "methods": ["site-base.tar.xz", "data-coauthor"],
}


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "-q", *args], check=True)


def wheel_name(path: Path) -> str:
    return normalise(path.name.split("-")[0])


def constraints(work: Path) -> Path:
    """This venv's versions of everything (``pip freeze``), for the download's resolver."""
    frozen = subprocess.run(
        [sys.executable, "-m", "pip", "freeze", "--exclude-editable"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = work / "constraints.txt"
    path.write_text("\n".join(line for line in frozen.splitlines() if "==" in line) + "\n")
    return path


def build_site(work: Path) -> Path:
    """Download the closure of :data:`CARRIED` for the target at this venv's versions, drop
    :data:`FROM_IMAGE`, install the rest into ``work/site`` and trim Ray."""
    wheels = work / "wheels"
    specs = [f"{name}=={md.version(name.split('[')[0])}" for name in CARRIED]
    for name in SOURCE_ONLY:
        pip("wheel", "--no-deps", "-w", str(wheels), f"{name}=={md.version(name)}")
    local = sorted(wheels.glob("*.whl"))
    pip(
        "download",
        "-d",
        str(wheels),
        "-c",
        str(constraints(work)),
        *TARGET,
        *specs,
        *map(str, local),
    )
    keep = [w for w in sorted(wheels.glob("*.whl")) if wheel_name(w) not in FROM_IMAGE]
    site = work / "site"
    pip("install", "--no-deps", "--no-compile", "--target", str(site), *TARGET, *map(str, keep))
    for part in RAY_TRIM:
        shutil.rmtree(site / part, ignore_errors=True)
    return site


def pack(site: Path, dest: Path, ray: bool) -> None:
    """``site``'s Ray part (``ray``) or the rest, as ``site/...`` in ``dest``."""
    tmp = dest.with_suffix(".part")
    with tarfile.open(tmp, "w:xz", preset=6) as tar:
        for path in sorted(site.rglob("*")):
            rel = path.relative_to(site).as_posix()
            if (path.is_file() or path.is_symlink()) and bool(RAY_PARTS.match(rel)) == ray:
                tar.add(path, arcname=f"site/{rel}", recursive=False)
    os.replace(tmp, dest)


def copy_data(root: Path) -> int:
    dest = KIT / "data-coauthor"
    shutil.rmtree(dest, ignore_errors=True)
    for folder in ("Coauthor/CS", "Coauthor/Physics"):
        src = root / folder
        if not src.is_dir():
            sys.exit(f"{src} is missing: set FGL_DATA_ROOT to the folder with the raw datasets.")
        shutil.copytree(src, dest / folder, ignore=shutil.ignore_patterns("processed"))
    partition = root.parent / "fedspray_partition"
    physics = sorted(partition.glob("Physics_*.txt"))
    if not physics:
        sys.exit(
            f"no Physics_*.txt in {partition}: FedSpray's Physics partition is read from beside the data."
        )
    (dest / "fedspray_partition").mkdir()
    for f in physics:
        shutil.copy2(f, dest / "fedspray_partition" / f.name)
    return sum(f.stat().st_size for f in dest.rglob("*") if f.is_file())


def tree_size() -> int:
    """Bytes of the files a call sends besides what it carries (tracked and untracked)."""
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    return sum((REPO / f).stat().st_size for f in files if f and (REPO / f).is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--data-root", default=os.environ.get("FGL_DATA_ROOT", str(REPO.parent / "shared" / "data"))
    )
    ap.add_argument("--skip-site", action="store_true", help="keep existing site archives")
    args = ap.parse_args()
    KIT.mkdir(exist_ok=True)
    archives = {"site-base.tar.xz": False, "site-ray.tar.xz": True}
    if not (args.skip_site and all((KIT / a).exists() for a in archives)):
        with tempfile.TemporaryDirectory() as work:
            site = build_site(Path(work))
            for name, ray in archives.items():
                pack(site, KIT / name, ray)
    sizes = {name: (KIT / name).stat().st_size for name in archives}
    sizes["data-coauthor"] = copy_data(Path(args.data_root).resolve())
    tree = tree_size()
    mib = 2**20
    print(f"repository files sent with every call: {tree / mib:.1f} MiB")
    for name, size in sizes.items():
        print(f"{name}: {size / mib:.1f} MiB")
    for stage, paths in CALLS.items():
        total = tree + sum(sizes[p] for p in paths)
        status = "fits" if total <= CALL_LIMIT else "OVER the 64 MiB a call sends"
        carry = ", ".join(f'".device-kit/{p}"' for p in paths)
        print(
            f"call `{stage}`: carry [{carry}], command `bash experiments/platform/gpu_session.sh {stage}`"
            f" ({total / mib:.1f} MiB, {status})"
        )


if __name__ == "__main__":
    main()
