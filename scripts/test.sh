#!/usr/bin/env bash
# Set up .venv (if needed) and run the whole test suite against the offline datasets.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
export FGL_DATA_ROOT=${FGL_DATA_ROOT:-$(cd .. && pwd)/shared/data}
python -m pytest -q "$@"
