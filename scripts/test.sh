#!/usr/bin/env bash
# Set up .venv (if needed) and run the whole test suite against the offline datasets, in
# FGL_TEST_WORKERS processes (pytest-xdist; default 4, 0 runs it in this process). Most of
# the suite's wall time is spent waiting on Flower's runtimes (SuperLink, SuperNodes, Ray,
# Jupyter kernels), so more workers than cores still shorten it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
export FGL_DATA_ROOT=${FGL_DATA_ROOT:-$(cd .. && pwd)/shared/data}
python -m pytest -q -n "${FGL_TEST_WORKERS:-4}" --dist worksteal "$@"
