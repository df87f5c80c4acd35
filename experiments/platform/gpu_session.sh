#!/usr/bin/env bash
# The GPU benchmark on a lent machine (/work/.library/device), in two calls that each stand
# alone (best made back to back on one warm machine: a fresh start costs a minute or more).
# Prepare first, here: FGL_DATA_ROOT=../shared/data python experiments/platform/device_kit.py
#
#   call 1, carry [".device-kit/site-base.tar.xz", ".device-kit/site-ray.tar.xz"], timeout_s 420:
#       bash experiments/platform/gpu_session.sh setup
#       the tests marked gpu, clients per GPU, 1,000 clients (stops itself after 330 s)
#   call 2, carry [".device-kit/site-base.tar.xz", ".device-kit/data-coauthor"], timeout_s 330:
#       bash experiments/platform/gpu_session.sh methods
#       FedSpray on Physics and O-pFGL on CS, device=cuda against device=cpu (stops after 240 s)
#
# Each writes gpu-<stage>.md (the section's part, row by row) and gpu-<stage>.log (every
# run's output) to $OUT. Back here:
#   python experiments/platform/gpu_benchmark.py --write-doc gpu-setup.md gpu-methods.md
set -euo pipefail
cd "$(dirname "$0")/../.."
KIT=$PWD/.device-kit
STAGE=${1:?usage: gpu_session.sh setup|methods}
OUT=${OUT:-$KIT/out}
mkdir -p "$OUT"
case "$STAGE" in
    setup) ARCHIVES="site-base.tar.xz site-ray.tar.xz" ;;
    methods) ARCHIVES="site-base.tar.xz" ;;
    *) echo "unknown stage $STAGE: setup or methods" >&2; exit 2 ;;
esac

# what an earlier call stopped at its limit may have left running (Flower starts its
# SuperLink in a session of its own)
pkill -9 -f "flower-superlink|flwr-simulation|flwr-serverapp|raylet|gcs_server" 2>/dev/null || true

rm -rf "$KIT/site"
for a in $ARCHIVES; do
    [ -f "$KIT/$a" ] || { echo "carry .device-kit/$a (made here by experiments/platform/device_kit.py)" >&2; exit 2; }
    python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter='fully_trusted')" \
        "$KIT/$a" "$KIT"
done
# pip wrote the console scripts for the packing machine's interpreter: point them at this one
sed -i '1s|^#!.*python.*$|#!/usr/bin/env python3|' "$KIT"/site/bin/*

export PYTHONPATH=$KIT/site:$PWD PATH=$KIT/site/bin:$PATH PYTHONUNBUFFERED=1
export FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1
python3 -c "import sys, torch, torch_geometric, flwr; print('python', sys.version.split()[0], 'torch', torch.__version__,
'pyg', torch_geometric.__version__, 'flwr', flwr.__version__, 'gpu', torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)"

BENCH=(python3 experiments/platform/gpu_benchmark.py --out "$OUT/gpu-$STAGE.md" --log "$OUT/gpu-$STAGE.log")
if [ "$STAGE" = setup ]; then
    "${BENCH[@]}" --parts tests,fractional,scale --deadline 330
else
    [ -d "$KIT/data-coauthor" ] || { echo "carry .device-kit/data-coauthor" >&2; exit 2; }
    FGL_DATA_ROOT=$KIT/data-coauthor "${BENCH[@]}" --parts fedspray,opfgl --deadline 240 --cpu-limit 75 \
        --fedspray-rounds 50 --fedspray-partition "$KIT/data-coauthor/fedspray_partition"
fi
