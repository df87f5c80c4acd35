"""CPU against CUDA on a machine with a GPU; its output is the "On a GPU" section of
``docs/performance.md``.

Parts (``--parts``, run in the order given; every table row is appended to ``--out`` as soon
as it is measured, so a run stopped at a time limit still leaves what it measured):

- ``tests``: the tests marked ``gpu`` (``pytest -m gpu``; skipped without a GPU): every
  registered method's out-of-the-box demo on CUDA, six methods on CUDA against the CPU,
  mini-batches cut on the device;
- ``fractional``: one FedAvg job in the Ray simulation with ``--gpus-per-client`` 0 (on the
  CPU), 0.5 and 1/16: clients per GPU against seconds per round;
- ``scale``: the 1,000-client job of the section "1000 virtual clients" on the GPU;
- ``fedspray``: FedSpray on Coauthor-Physics (Table 2's protocol, ``--fedspray-rounds``),
  in-process with all CPU threads, ``device=cuda`` then ``device=cpu``;
- ``opfgl``: O-pFGL on Coauthor-CS (Louvain+, Table 15's row), likewise.

Each job's dataset and partition are built before it is timed (``fgl_flower.launch.prepare``),
so no run of a pair pays for them. Every run stops at ``--deadline`` (seconds from the start);
a CPU run also at ``--cpu-limit``, and is reported as stopped, with its seconds per round
where it finished some. The runs' output goes to ``--log``.

On a lent machine (``/work/.library/device``) run it through
``experiments/platform/gpu_session.sh``, which ``experiments/platform/device_kit.py``
prepares. Here, paste what came back into ``docs/performance.md``::

    python experiments/platform/gpu_benchmark.py --write-doc gpu-setup.md gpu-methods.md
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "performance.md"
HEADING = "## On a GPU"
HOW = (
    "Made with `experiments/platform/gpu_session.sh` on a lent machine (prepared here by "
    "`experiments/platform/device_kit.py`)."
)
FEDSPRAY_PARTITION = "../shared/fedspray_partition"  # as the command is shown
FEDSPRAY = [
    "--method",
    "fedspray",
    "--dataset",
    "Physics",
    "--partition",
    "files",
    "--clients",
    "12",
    "--model",
    "gcn",
    "--set",
    "split=0.4,0.3,0.3",
    "--set",
    "hidden=64",
    "--set",
    "dropout=0.0",
    "--set",
    "lr=0.003",
    "--set",
    "weight-decay=0.0",
    "--set",
    "local-epochs=5",
    "--set",
    "model-init=uniform01",
    "--set",
    "select-by=val_loss",
]
OPFGL = [
    "--method",
    "opfgl",
    "--dataset",
    "CS",
    "--partition",
    "louvain-plus",
    "--clients",
    "10",
    "--rounds",
    "1",
    "--model",
    "gcn",
    "--set",
    "opfgl.beta=0.2",
    "--set",
    "opfgl.gamma-max=0.2",
    "--set",
    "opfgl.lr-ft=0.001",
    "--set",
    "opfgl.rate=0.01",
    "--set",
    "opfgl.topk=1",
    "--set",
    "split=0.2,0.4,0.4",
    "--set",
    "split-mode=stratified",
    "--set",
    "split-seed=42",
    "--set",
    "partition-seed=42",
    "--set",
    "dropout=0.0",
    "--set",
    "hidden=64",
    "--set",
    "eval-weight=client-size",
]
#: The fractional-GPU job: more clients than can run at once.
FRACTIONAL = [
    "--method",
    "fedavg",
    "--dataset",
    "synthetic",
    "--partition",
    "metis",
    "--clients",
    "32",
    "--rounds",
    "10",
    "--seed",
    "0",
    "--set",
    "data.synthetic.num-nodes=20000",
]
#: The 1,000-client job of ``performance.py``'s scale part.
SCALE = [
    "--method",
    "fedavg",
    "--dataset",
    "synthetic",
    "--partition",
    "metis",
    "--clients",
    "1000",
    "--fraction-train",
    "0.05",
    "--rounds",
    "20",
    "--seed",
    "0",
    "--set",
    "data.synthetic.num-nodes=100000",
]


class Session:
    """The benchmark's clock, options and log."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args, self.start = args, time.perf_counter()
        self.cpus = os.cpu_count() or 1

    def left(self) -> float:
        return self.args.deadline - (time.perf_counter() - self.start)

    def log(self, text: str) -> None:
        with self.args.log.open("a") as f:
            f.write(text)

    def prepare(self, argv: list[str], engine: str) -> None:
        """Build the job's dataset and partition caches before any run of it is timed."""
        from fgl_flower.cli import prepare_command

        prepare_command(argv, self.args.work / "prepare", engine)

    def run(self, argv: list[str], name: str, limit: float | None = None) -> dict:
        """``fgl run argv`` (the module: no entry point needs installing) into
        ``work/name``, stopped at ``limit`` or the deadline: wall seconds, finished rounds,
        summary (``None`` when stopped)."""
        import psutil

        from fgl_flower.runtime.processes import stop_processes

        out = self.args.work / name
        timeout = max(1.0, min(limit or float("inf"), self.left()))
        cmd = [
            sys.executable,
            "-m",
            "fgl_flower.cli",
            "run",
            *argv,
            "--set",
            "progress=false",
            "--out",
            str(out),
            "--overwrite",
        ]
        self.log(f"\n$ {' '.join(cmd)}\n")
        t0 = time.perf_counter()
        stopped = False
        with (
            self.args.log.open("a") as f,
            subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT) as proc,
        ):
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:  # the run and everything below it, Flower's
                stop_processes([psutil.Process(proc.pid)], grace=0)  # own-session SuperLink too
                stopped, code = True, None
        wall = time.perf_counter() - t0
        if not stopped and code != 0:
            raise RuntimeError(f"`{' '.join(cmd)}` exited {code}; its output is in {self.args.log}")
        path = out / "rounds.jsonl"
        rounds = (
            [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        )
        summary = None if stopped else json.loads((out / "summary.json").read_text())
        return {"wall_s": wall, "rounds": rounds, "summary": summary, "stopped": stopped}


def shown(argv: list[str]) -> str:
    return "`fgl run " + " ".join(argv) + "`"


def per_round(run: dict) -> float:
    return statistics.median(r["time_s"] for r in run["rounds"])


def part_tests(s: Session) -> Iterator[str]:
    t0 = time.perf_counter()
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-rs",
        "-p",
        "no:cacheprovider",
        "-m",
        "gpu",
        "-n",
        str(s.args.test_workers),
    ]
    s.log(f"\n$ {' '.join(cmd)}\n")
    with s.args.log.open("a") as f:
        try:
            res = subprocess.run(
                cmd,
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=max(1.0, s.left()),
            )
            out = res.stdout
        except subprocess.TimeoutExpired as exc:
            out = (
                (exc.stdout or b"").decode()
                if isinstance(exc.stdout, bytes)
                else (exc.stdout or "")
            )
            out += f"\nstopped at the deadline after {time.perf_counter() - t0:.0f} s\n"
        f.write(out)
    lines = out.strip().splitlines()
    failed = [line for line in lines if line.startswith(("FAILED", "ERROR"))]
    yield (
        f"Tests marked `gpu` (`pytest -m gpu -n {s.args.test_workers}`): "
        f"{lines[-1] if lines else 'no output'} ({time.perf_counter() - t0:.0f} s).\n"
    )
    for line in failed:
        yield f"- {line}\n"


def part_fractional(s: Session) -> Iterator[str]:
    s.prepare(FRACTIONAL, "simulation")
    yield (
        f"Clients per GPU: FedAvg/GCN, synthetic graph of 20,000 nodes, METIS into 32 clients, 10 rounds, "
        f"Ray simulation, 1 CPU per client ({s.cpus} CPUs).\n\n"
        "| `--gpus-per-client` | clients at once | round (median) | wall | final test acc |\n|---|---|---|---|---|\n"
    )
    for gpus in (0.0, 0.5, 0.0625):
        extra = ["--device", "cpu"] if gpus == 0 else ["--gpus-per-client", str(gpus)]
        run = s.run([*FRACTIONAL, *extra], f"fractional-{gpus}")
        at_once = s.cpus if gpus == 0 else min(s.cpus, int(round(1 / gpus)))
        if run["stopped"]:
            yield f"| {gpus:g} | {at_once} | stopped at the deadline | — | — |\n"
            return
        yield (
            f"| {gpus:g} | {at_once} | {per_round(run):.2f} s | {run['wall_s']:.0f} s | "
            f"{100 * run['summary']['final']['test_acc']:.2f} |\n"
        )
    yield f"\nCommand: {shown(FRACTIONAL)} with `--device cpu` or `--gpus-per-client G`.\n"


def part_scale(s: Session) -> Iterator[str]:
    argv = [*SCALE, "--gpus-per-client", "0.0625"]
    s.prepare(argv, "simulation")
    run = s.run(argv, "scale")
    if run["stopped"]:
        yield f"1,000 virtual clients on the GPU: stopped at the deadline after {run['wall_s']:.0f} s.\n"
        return
    yield (
        f"1,000 virtual clients on the GPU ({min(s.cpus, 16)} at once): {run['wall_s']:.0f} s wall "
        f"(partition cached), {per_round(run):.2f} s per round (median), final test acc "
        f"{100 * run['summary']['final']['test_acc']:.2f}. Command: {shown(argv)}.\n"
    )


def cpu_vs_cuda(s: Session, name: str, argv: list[str], shown_argv: list[str]) -> Iterator[str]:
    """Rows of ``argv`` in-process on CUDA, then on the CPU with all its threads."""
    threads = ["--inprocess", "--cpus-per-client", str(s.cpus)]
    s.prepare([*argv, *threads], "inprocess")
    for device in ("cuda", "cpu"):
        run = s.run(
            [*argv, *threads, "--device", device],
            f"{name}-{device}".replace(" ", "_").replace(",", ""),
            limit=s.args.cpu_limit if device == "cpu" else None,
        )
        if run["stopped"]:
            done = (
                f", {len(run['rounds'])} rounds at {per_round(run):.2f} s" if run["rounds"] else ""
            )
            yield f"| {name} | {device} | stopped after {run['wall_s']:.0f} s{done} | — | — |\n"
            continue
        summary = run["summary"]
        yield (
            f"| {name} | {device} | {run['wall_s']:.0f} s | {summary['total_time_s']:.0f} s | "
            f"{100 * summary['best_val']['test_acc']:.2f} |\n"
        )
    yield f"\nCommand: {shown(shown_argv)} `--inprocess --cpus-per-client {s.cpus} --device cuda|cpu`.\n"


TABLE = "| run | device | wall | of which rounds | test acc (best val) |\n|---|---|---|---|---|\n"


def part_fedspray(s: Session) -> Iterator[str]:
    rounds = ["--rounds", str(s.args.fedspray_rounds)]
    argv = [
        *FEDSPRAY,
        *rounds,
        "--set",
        f"data.files.dir={Path(s.args.fedspray_partition).resolve()}",
    ]
    yield TABLE
    yield from cpu_vs_cuda(
        s,
        f"FedSpray, Physics, {s.args.fedspray_rounds} rounds",
        argv,
        [*FEDSPRAY, *rounds, "--set", f"data.files.dir={FEDSPRAY_PARTITION}"],
    )


def part_opfgl(s: Session) -> Iterator[str]:
    yield TABLE
    yield from cpu_vs_cuda(s, "O-pFGL, CS, Louvain+", OPFGL, OPFGL)


PARTS = {
    "tests": part_tests,
    "fractional": part_fractional,
    "scale": part_scale,
    "fedspray": part_fedspray,
    "opfgl": part_opfgl,
}


def write_doc(sections: list[Path]) -> None:
    """Replace the "On a GPU" section of ``docs/performance.md`` by ``sections`` (a line
    that repeats the previous section's first line, the same machine, is left out), through
    ``performance.py``'s page writer as ``peers.py`` does."""
    sys.path.insert(0, str(Path(__file__).parent))
    from performance import kept_sections
    from performance import write_doc as write_page

    texts, first = [], None
    for path in sections:
        lines = path.read_text().strip().splitlines()
        if lines and lines[0] == first:
            lines = lines[1:]
        first = first or (lines[0] if lines else None)
        texts.append("\n".join(lines).strip() + "\n")
    page = kept_sections(DOC)
    page["gpu"] = f"{HEADING}\n\n" + "\n".join(texts) + f"\n{HOW}\n"
    write_page(DOC, page)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="tests,fractional,scale,fedspray,opfgl")
    ap.add_argument("--out", type=Path, help="the section's Markdown (appended row by row)")
    ap.add_argument(
        "--log", type=Path, help="the runs' and the tests' output (default: beside --out)"
    )
    ap.add_argument("--work", type=Path, default=Path("/tmp/gpu-benchmark"), help="run folders")
    ap.add_argument(
        "--deadline", type=float, default=3600.0, help="seconds from the start for all parts"
    )
    ap.add_argument("--cpu-limit", type=float, default=240.0, help="seconds a CPU run may take")
    ap.add_argument("--fedspray-rounds", type=int, default=300)
    ap.add_argument(
        "--fedspray-partition", default=str(REPO.parent / "shared" / "fedspray_partition")
    )
    ap.add_argument("--test-workers", type=int, default=4)
    ap.add_argument(
        "--write-doc",
        nargs="+",
        type=Path,
        metavar="SECTION",
        help="paste these section files into docs/performance.md and stop",
    )
    args = ap.parse_args()
    if args.write_doc:
        write_doc(args.write_doc)
        return
    parts = args.parts.split(",")
    unknown = sorted(set(parts) - set(PARTS))
    if unknown or not args.out:
        sys.exit(
            f"unknown part(s) {unknown}; choose from {sorted(PARTS)}"
            if unknown
            else "--out is required"
        )

    import torch

    if not torch.cuda.is_available():
        sys.exit("No GPU visible to torch: run this on a machine with one.")
    args.log = args.log or args.out.with_suffix(".log")
    args.work.mkdir(parents=True, exist_ok=True)
    s = Session(args)

    def emit(text: str) -> None:
        with args.out.open("a") as f:
            f.write(text)
        print(text, end="", flush=True)

    emit(
        f"Measured by `experiments/platform/gpu_benchmark.py` on {torch.cuda.get_device_name(0)} "
        f"(torch {torch.__version__}, CUDA {torch.version.cuda}, {s.cpus} CPUs).\n\n"
    )
    for name in parts:
        if s.left() < 30:
            emit(f"Part `{name}`: not run, the deadline ({args.deadline:.0f} s) came first.\n\n")
            continue
        t0 = time.perf_counter()
        try:
            for text in PARTS[name](s):
                emit(text)
        except Exception as exc:  # reported in the section; the other parts still run
            emit(f"\nPart `{name}` failed after {time.perf_counter() - t0:.0f} s: {exc}\n")
        emit("\n")


if __name__ == "__main__":
    main()
