"""CPU against CUDA on a machine with a GPU; its output is the "On a GPU" section of
``docs/performance.md``.

Parts (``--parts``, run in the order given; each appends its lines to ``--out`` as soon as it
ends, so a run stopped at a time limit still leaves what it measured):

- ``tests``: the tests marked ``gpu`` (``pytest -m gpu``; skipped without a GPU): every
  registered method's out-of-the-box demo on CUDA, six methods on CUDA against the CPU,
  mini-batches cut on the device;
- ``fractional``: one FedAvg job in the Ray simulation with ``--gpus-per-client`` 0 (on the
  CPU), 0.5 and 1/16: clients per GPU against seconds per round;
- ``scale``: the 1,000-client job of the section "1000 virtual clients" on the GPU;
- ``fedspray``: FedSpray on Coauthor-Physics (Table 2's protocol, ``--fedspray-rounds``),
  in-process, ``device=cuda`` then ``device=cpu``;
- ``opfgl``: O-pFGL on Coauthor-CS (Louvain+, Table 15's row), likewise.

A CPU run that outlasts ``--cpu-limit`` seconds is stopped and reported as such.

On a lent machine (``/work/.library/device``) run it through
``experiments/platform/gpu_session.sh``, which ``experiments/platform/device_kit.py``
prepares. Here, paste what came back into ``docs/performance.md``::

    python experiments/platform/gpu_benchmark.py --write-doc gpu-setup.md gpu-methods.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "performance.md"
HEADING = "## On a GPU"
FEDSPRAY = ["--method", "fedspray", "--dataset", "Physics", "--partition", "files", "--clients", "12",
            "--model", "gcn", "--set", "split=0.4,0.3,0.3", "--set", "hidden=64", "--set", "dropout=0.0",
            "--set", "lr=0.003", "--set", "weight-decay=0.0", "--set", "local-epochs=5",
            "--set", "model-init=uniform01", "--set", "select-by=val_loss"]
OPFGL = ["--method", "opfgl", "--dataset", "CS", "--partition", "louvain-plus", "--clients", "10",
         "--rounds", "1", "--model", "gcn", "--set", "opfgl.rate=0.01", "--set", "opfgl.topk=1",
         "--set", "opfgl.gamma-max=0.2", "--set", "opfgl.lr-ft=0.001", "--set", "split=0.2,0.4,0.4",
         "--set", "split-mode=stratified", "--set", "split-seed=42", "--set", "partition-seed=42",
         "--set", "dropout=0.0", "--set", "hidden=64", "--set", "eval-weight=client-size"]
#: The fractional-GPU job: enough clients that 16 actors can run at once.
FRACTIONAL = ["--method", "fedavg", "--dataset", "synthetic", "--partition", "metis", "--clients", "32",
              "--rounds", "10", "--seed", "0", "--set", "data.synthetic.num-nodes=20000"]
#: The 1,000-client job of ``performance.py``'s scale part.
SCALE = ["--method", "fedavg", "--dataset", "synthetic", "--partition", "metis", "--clients", "1000",
         "--fraction-train", "0.05", "--rounds", "20", "--seed", "0", "--set", "data.synthetic.num-nodes=100000"]


def fgl_run(argv: list[str], out: Path, timeout: float | None = None) -> dict | None:
    """``fgl run argv --out out`` (the module, so that no entry point needs installing):
    wall seconds, summary and rounds; ``None`` if it outlasted ``timeout``."""
    cmd = [sys.executable, "-m", "fgl_flower.cli", "run", *argv, "--set", "progress=false",
           "--out", str(out), "--overwrite"]
    t0 = time.perf_counter()
    try:
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    rounds = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines()]
    return {"wall_s": time.perf_counter() - t0, "rounds": rounds,
            "summary": json.loads((out / "summary.json").read_text())}


def command(argv: list[str]) -> str:
    return "`fgl run " + " ".join(argv) + "`"


def part_tests(tmp: Path, args) -> str:
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-m", "gpu",
                          "-n", str(args.test_workers)], cwd=REPO, capture_output=True, text=True)
    (tmp / "pytest.log").write_text(res.stdout + res.stderr)
    lines = res.stdout.strip().splitlines()
    failed = [line for line in lines if line.startswith(("FAILED", "ERROR"))]
    last = lines[-1] if lines else "no output"
    text = f"Tests marked `gpu` (`pytest -m gpu -n {args.test_workers}`): {last} ({time.perf_counter() - t0:.0f} s)."
    return text + ("\n" + "\n".join(f"- {line}" for line in failed) if failed else "") + "\n"


def part_fractional(tmp: Path, args) -> str:
    rows = []
    for gpus in (0.0, 0.5, 0.0625):
        extra = ["--device", "cpu"] if gpus == 0 else ["--gpus-per-client", str(gpus)]
        run = fgl_run([*FRACTIONAL, *extra], tmp / f"fractional-{gpus}")
        per_round = statistics.median(r["time_s"] for r in run["rounds"])
        at_once = "16 (CPU)" if gpus == 0 else str(min(16, int(round(1 / gpus))))
        rows.append(f"| {gpus:g} | {at_once} | {per_round:.2f} s | {run['wall_s']:.0f} s | "
                    f"{100 * run['summary']['final']['test_acc']:.2f} |")
    return ("Clients per GPU: FedAvg/GCN, synthetic graph of 20,000 nodes, METIS into 32 clients, 10 rounds, "
            "Ray simulation, 1 CPU per client (16 CPUs).\n\n"
            "| `--gpus-per-client` | clients at once | round (median) | wall | final test acc |\n"
            "|---|---|---|---|---|\n" + "\n".join(rows) + f"\n\nCommand: {command(FRACTIONAL)} "
            "with `--device cpu` or `--gpus-per-client G`.\n")


def part_scale(tmp: Path, args) -> str:
    argv = [*SCALE, "--gpus-per-client", "0.0625"]
    run = fgl_run(argv, tmp / "scale")
    per_round = statistics.median(r["time_s"] for r in run["rounds"])
    return (f"1,000 virtual clients on the GPU (16 at once): {run['wall_s']:.0f} s wall (partitioning "
            f"included), {per_round:.2f} s per round (median), final test acc "
            f"{100 * run['summary']['final']['test_acc']:.2f}. Command: {command(argv)}.\n")


def cpu_vs_cuda(name: str, argv: list[str], tmp: Path, cpu_limit: float) -> str:
    rows = []
    for device in ("cuda", "cpu"):
        run = fgl_run([*argv, "--inprocess", "--device", device], tmp / f"{name}-{device}",
                      timeout=cpu_limit if device == "cpu" else None)
        if run is None:
            rows.append(f"| {name} | {device} | stopped after {cpu_limit:.0f} s | — | — |")
            continue
        s = run["summary"]
        rows.append(f"| {name} | {device} | {run['wall_s']:.0f} s | {s['total_time_s']:.0f} s | "
                    f"{100 * s['best_val']['test_acc']:.2f} |")
    return "\n".join(rows)


def part_fedspray(tmp: Path, args) -> str:
    argv = [*FEDSPRAY, "--rounds", str(args.fedspray_rounds), "--set",
            f"data.files.dir={Path(args.fedspray_partition).resolve()}"]
    return table(cpu_vs_cuda(f"FedSpray, Physics, {args.fedspray_rounds} rounds", argv, tmp, args.cpu_limit), argv)


def part_opfgl(tmp: Path, args) -> str:
    return table(cpu_vs_cuda("O-pFGL, CS, Louvain+", OPFGL, tmp, args.cpu_limit), OPFGL)


def table(rows: str, argv: list[str]) -> str:
    return ("| run | device | wall | of which rounds | test acc (best val) |\n|---|---|---|---|---|\n"
            f"{rows}\n\nCommand: {command(argv)} `--inprocess --device cuda|cpu`.\n")


PARTS = {"tests": part_tests, "fractional": part_fractional, "scale": part_scale,
         "fedspray": part_fedspray, "opfgl": part_opfgl}


def write_doc(sections: list[Path]) -> None:
    """Replace the "On a GPU" section of ``docs/performance.md`` by ``sections``."""
    from fgl_flower.results import atomic_write_text

    body = "\n".join(p.read_text().strip() + "\n" for p in sections)
    section = f"{HEADING}\n\n{body}"
    text = DOC.read_text()
    if HEADING in text:  # replace the previous measurement, up to the next section
        start = text.index(HEADING)
        end = text.find("\n## ", start + len(HEADING))
        text = text[:start] + section + (text[end:] if end >= 0 else "")
    else:
        text = text.rstrip() + "\n\n" + section
    atomic_write_text(DOC, text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="tests,fractional,scale,fedspray,opfgl")
    ap.add_argument("--out", type=Path, help="the section's Markdown (appended to part by part)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/gpu-benchmark"), help="run folders")
    ap.add_argument("--cpu-limit", type=float, default=240.0, help="seconds a CPU run may take")
    ap.add_argument("--fedspray-rounds", type=int, default=300)
    ap.add_argument("--fedspray-partition", default=str(REPO.parent / "shared" / "fedspray_partition"))
    ap.add_argument("--test-workers", type=int, default=4)
    ap.add_argument("--write-doc", nargs="+", type=Path, metavar="SECTION",
                    help="paste these section files into docs/performance.md and stop")
    args = ap.parse_args()
    if args.write_doc:
        write_doc(args.write_doc)
        return
    parts = args.parts.split(",")
    unknown = sorted(set(parts) - set(PARTS))
    if unknown or not args.out:
        sys.exit(f"unknown part(s) {unknown}; choose from {sorted(PARTS)}" if unknown else "--out is required")

    import torch

    if not torch.cuda.is_available():
        sys.exit("No GPU visible to torch: run this on a machine with one.")
    args.work.mkdir(parents=True, exist_ok=True)
    with args.out.open("a") as f:
        f.write(f"Measured by `experiments/platform/gpu_benchmark.py` on {torch.cuda.get_device_name(0)} "
                f"(torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.get_num_threads()} CPU threads).\n\n")
    for name in parts:
        t0 = time.perf_counter()
        try:
            text = PARTS[name](args.work, args)
        except Exception as exc:  # one failed part must not lose the others' numbers
            text = f"Part `{name}` failed after {time.perf_counter() - t0:.0f} s: {exc!r}\n"
        with args.out.open("a") as f:
            f.write(text + "\n")
        print(text, flush=True)


if __name__ == "__main__":
    main()
