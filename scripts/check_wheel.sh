#!/usr/bin/env bash
# The package as a user installs it: build the wheel and sdist, check their metadata (twine),
# install the wheel in a fresh virtual environment (torch first, as scripts/setup.sh does, so
# that pip does not pick a CUDA build), then, from a folder that is not the checkout, run a
# two-round demo in-process and in simulation, a local deployment, and the Python API.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
. .venv/bin/activate
python -m build --outdir "$WORK/dist" . > "$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; exit 1; }
python -m twine check --strict "$WORK"/dist/*
deactivate
python3 -m venv "$WORK/env"
. "$WORK/env/bin/activate"
python -m pip install -q --upgrade pip
python -m pip install -q "torch==${TORCH_VERSION:-2.13.0}" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
python -m pip install -q "$WORK"/dist/*.whl
mkdir "$WORK/elsewhere" && cd "$WORK/elsewhere"
export FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1 FGL_CACHE_DIR="$WORK/cache"
python -c "import fgl_flower, sys; assert '$ROOT' not in fgl_flower.__file__, fgl_flower.__file__; print('fgl_flower from', fgl_flower.__file__)"
fgl --version
small=(--rounds 2 --clients 3 --set data.synthetic.num-nodes=300)
fgl run --inprocess "${small[@]}" --out runs/inprocess
fgl run "${small[@]}" --out runs/simulation
fgl deploy-local "${small[@]}" --out runs/deployment
python - <<'PY'
import json
import fgl_flower as fgl

small = dict(rounds=2, clients=3, data={"synthetic": {"num-nodes": 300}}, progress=False)
api = fgl.run("fedavg", backend="simulation", out="runs/api", **small)  # Flower's output: flwr.log
assert "Successfully started run" in open("runs/api/flwr.log").read()
final = {name: json.load(open(f"runs/{name}/summary.json"))["final"]["test_acc"]
         for name in ("inprocess", "simulation", "deployment", "api")}
print("final test accuracy:", final)
assert len(set(final.values())) == 1, "the runtimes disagree"
PY
echo "wheel check passed"
