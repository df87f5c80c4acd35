"""Convert S2FGL's shipped FLGo partition into node-list files for ``partition = "files"``.

The official repository (Wonder7racer/S2FGL) ships one Louvain task, ``my_louvain/data.json``:
CiteSeer, 10 clients (sizes 452, 360, ..., 291). It cuts far more edges than a Louvain
partition made here (2,696 of 4,552 undirected edges stay inside clients, against 4,291 for
``partition = "louvain"``), so it is run as its own row in ``official_partition.toml``.

Usage (from the project root, with a clone of the official repository)::

    python experiments/s2fgl/official_partition.py \\
        S2FGL/S2FGL_ICML25_Code/my_louvain/data.json runs/s2fgl-partition

writes ``runs/s2fgl-partition/CiteSeer_00.txt`` ... ``CiteSeer_09.txt`` (one global node id per
line, the layout :class:`fgl_flower.datasets.partition.files.FilesPartitioner` reads).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def convert(data_json: Path, out: Path, dataset: str = "CiteSeer") -> list[int]:
    """Write ``<out>/<dataset>_<k>.txt`` per client of an FLGo ``data.json``; the client sizes."""
    task = json.loads(data_json.read_text())
    names = task.get("client_names")
    if not names:
        raise SystemExit(f"{data_json}: no 'client_names'; is this an FLGo task's data.json?")
    out.mkdir(parents=True, exist_ok=True)
    sizes = []
    for k, name in enumerate(names):
        nodes = [int(v) for v in task[name]["data"]]
        tmp = out / f".{dataset}_{k:02d}.txt.tmp"
        tmp.write_text("".join(f"{v}\n" for v in nodes))
        tmp.replace(out / f"{dataset}_{k:02d}.txt")
        sizes.append(len(nodes))
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_json", type=Path, help="FLGo task file, e.g. my_louvain/data.json")
    parser.add_argument("out", type=Path, help="output folder (e.g. runs/s2fgl-partition)")
    parser.add_argument("--dataset", default="CiteSeer", help="file-name prefix (default CiteSeer)")
    args = parser.parse_args()
    sizes = convert(args.data_json, args.out, args.dataset)
    print(f"{len(sizes)} clients, sizes {sizes}, written to {args.out}")


if __name__ == "__main__":
    main()
