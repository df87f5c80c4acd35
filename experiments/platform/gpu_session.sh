#!/usr/bin/env bash
# The GPU benchmark on a lent machine (/work/.library/device), in two calls made back to back
# (the second uses what the first unpacked; a machine given back in between starts bare).
# Prepare first, here: FGL_DATA_ROOT=../shared/data python experiments/platform/device_kit.py
#
#   call 1, carry [".device-kit/site.tar.xz"]:   bash experiments/platform/gpu_session.sh setup
#       unpacks Flower, Ray and the rest, then: the tests marked gpu, clients per GPU, 1,000 clients
#   call 2, carry [".device-kit/data-coauthor"]: bash experiments/platform/gpu_session.sh methods
#       FedSpray on Physics and O-pFGL on CS, device=cuda against device=cpu
#
# Each writes its part of the "On a GPU" section to $OUT/gpu-<stage>.md as it goes; back
# here: python experiments/platform/gpu_benchmark.py --write-doc gpu-setup.md gpu-methods.md
set -euo pipefail
cd "$(dirname "$0")/../.."
KIT=$PWD/.device-kit
STAGE=${1:?usage: gpu_session.sh setup|methods}
OUT=${OUT:-$PWD/.device-kit/out}
mkdir -p "$OUT"

if [ "$STAGE" = setup ]; then
    [ -f "$KIT/site.tar.xz" ] || { echo "carry .device-kit/site.tar.xz (made by device_kit.py)" >&2; exit 2; }
    rm -rf "$KIT/site"
    tar -xJf "$KIT/site.tar.xz" -C "$KIT"
    # pip wrote the console scripts for this machine's interpreter: point them at the image's
    sed -i '1s|^#!.*python.*$|#!/usr/bin/env python3|' "$KIT"/site/bin/*
fi
[ -d "$KIT/site" ] || { echo "no $KIT/site: run the setup call first, on the same warm machine" >&2; exit 2; }

export PYTHONPATH=$KIT/site:$PWD PATH=$KIT/site/bin:$PATH PYTHONUNBUFFERED=1
export FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1 FLWR_HOME=$KIT/flwr-home
python3 -c "import sys, torch, torch_geometric, flwr, ray; print('python', sys.version.split()[0], 'torch', torch.__version__,
'pyg', torch_geometric.__version__, 'flwr', flwr.__version__, 'ray', ray.__version__, 'gpu', torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)"

case "$STAGE" in
    setup)
        python3 experiments/platform/gpu_benchmark.py --parts tests,fractional,scale --out "$OUT/gpu-setup.md"
        ;;
    methods)
        [ -d "$KIT/data-coauthor" ] || { echo "carry .device-kit/data-coauthor" >&2; exit 2; }
        FGL_DATA_ROOT=$KIT/data-coauthor python3 experiments/platform/gpu_benchmark.py --parts fedspray,opfgl \
            --fedspray-rounds 50 --cpu-limit 150 --fedspray-partition "$KIT/data-coauthor/fedspray_partition" \
            --out "$OUT/gpu-methods.md"
        ;;
    *) echo "unknown stage $STAGE: setup or methods" >&2; exit 2 ;;
esac
