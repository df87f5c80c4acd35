#!/usr/bin/env bash
# Create .venv and install fgl-flower into it. torch comes first and only if none is
# importable yet: `pip install torch` alone resolves the CUDA build on Linux (several GB).
#   TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu    a CPU build from PyTorch's index
#   TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128  a CUDA 12.8 build
# Unset, pip's configured index decides (on this project's machines: a CPU wheel).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -d .venv ] || "$PY" -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
if ! python -c "import torch" 2>/dev/null; then
    python -m pip install -q "torch==${TORCH_VERSION:-2.13.0}" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
fi
python -m pip install -q -e ".[test,notebooks,docs,dev]"
