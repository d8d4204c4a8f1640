#!/usr/bin/env bash
# A smoke run of `yolodoctor fix --verify --apply` from Ultralytics defaults on the GPU.
# A profile of the defaults (yolo11n.yaml, imgsz 640, the 8,000-image dataset of bench/gpu_fixtures.sh, epochs=1 so
# the applied run is one whole epoch; close_mosaic=0 because Ultralytics 8.4 turns mosaic off when
# epoch >= epochs - close_mosaic), then fix --verify --apply started in its own process session (setsid) so that it
# outlives this script: call the script again on the same machine to keep waiting for it.
#   bash bench/gpu_fix_smoke.sh [SECONDS_TO_WAIT]      (repo root, yolodoctor and its dependencies installed)
set -uo pipefail
OUT_DIR=${OUT_DIR:-bench/out/gpu3}
DATA_DIR=${DATA_DIR:-bench/out/ds8k}
S="$OUT_DIR/smoke"
WAIT=${1:-500}
export YOLO_OFFLINE=1 PYTHONUNBUFFERED=1
mkdir -p "$S"
if [ ! -f "$DATA_DIR/.yolodoctor-dataset" ]; then
  python3 -m yolodoctor make-dataset "$DATA_DIR" --images "${IMAGES:-8000}" --force || exit 1
fi
if [ ! -f "$S/fix.started" ]; then
  python3 -m yolodoctor profile model=yolo11n.yaml "data=$PWD/$DATA_DIR/data.yaml" imgsz=640 epochs=1 close_mosaic=0 plots=False \
    "project=$PWD/$S/ul" --out "$S/defaults" --json > "$S/profile.json" 2> "$S/profile.log"
  echo "profile rc=$?"
  date +%s > "$S/fix.started"
  setsid bash -c "python3 -m yolodoctor fix '$S/defaults' --verify --apply --json > '$S/fix.json' 2> '$S/fix.log'; \
    echo \$? > '$S/fix.rc'; date +%s > '$S/fix.ended'" < /dev/null > /dev/null 2>&1 &
fi
t0=$(date +%s)
while [ ! -f "$S/fix.rc" ] && [ $(( $(date +%s) - t0 )) -lt "$WAIT" ]; do sleep 5; done
if [ -f "$S/fix.rc" ]; then
  echo "fix rc=$(cat "$S/fix.rc") in $(( $(cat "$S/fix.ended") - $(cat "$S/fix.started") )) s"
else
  echo "fix still running after $(( $(date +%s) - $(cat "$S/fix.started") )) s"
fi
tail -5 "$S/fix.log"
