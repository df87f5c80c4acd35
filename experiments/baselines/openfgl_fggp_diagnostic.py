"""Why OpenFGL's FGGP trails OpenFGL's own FedAvg: its FGGP run plain and with one part of its
loss or model changed, by a patch on OpenFGL's path only (its ``sitecustomize``), on the clients
and splits that ``openfgl_yardstick.py`` exports (Cora, this project's Louvain partition into 10
clients, OpenFGL's hyperparameters, 100 rounds). Prints the test accuracy at the best-validation
round per seed and variant::

    FGL_DATA_ROOT=../shared/data python experiments/baselines/openfgl_fggp_diagnostic.py \\
        --openfgl-python ~/venvs/openfgl/bin/python --seeds 0,1 --variants plain,no-proto-loss,gcn-norm
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import openfgl_yardstick as yardstick  # noqa: E402

#: Patches of OpenFGL's FGGP (``openfgl/flcore/fggp/client.py``'s names), one per variant.
PATCHES = {
    "plain": "",
    # its prototype alignment (cosine positive, raw dot-product negatives) left out
    "no-proto-loss": """
import torch
import openfgl.flcore.fggp.client as c
c.proto_align_loss = lambda *args, **kwargs: torch.zeros(())
""",
    # its GCN's raw 0/1 adjacency replaced by GCN's normalised one with self-loops
    "gcn-norm": """
import torch
import openfgl.flcore.fggp.client as c
from torch_geometric.nn.conv.gcn_conv import gcn_norm
def normalised(edge_index, *args, **kwargs):
    n = int(edge_index.max()) + 1
    ei, w = gcn_norm(edge_index, None, n, add_self_loops=True)
    return torch.sparse_coo_tensor(torch.stack([ei[1], ei[0]]), w, (n, n)).coalesce()
c.to_torch_csc_tensor = normalised
""",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--openfgl-python", required=True, help="python of a venv with openfgl-lib")
    ap.add_argument("--openfgl-root", default=str(Path.home() / "openfgl-data"))
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument(
        "--variants", default=",".join(PATCHES), help=f"comma-separated: {', '.join(PATCHES)}"
    )
    args = ap.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    if unknown := [v for v in variants if v not in PATCHES]:
        sys.exit(f"unknown variant(s) {unknown}: choose from {', '.join(PATCHES)}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "openfgl"
        root.mkdir()
        yardstick.export_partition(root, Path(args.openfgl_root).expanduser())
        site = root / "shims" / "sitecustomize.py"
        for seed in (int(s) for s in args.seeds.split(",")):
            for variant in variants:
                site.write_text(PATCHES[variant])
                acc = yardstick.run_openfgl(args.openfgl_python, root, "fggp", seed)
                print(f"seed {seed}, {variant}: {acc:.2f}", flush=True)


if __name__ == "__main__":
    main()
