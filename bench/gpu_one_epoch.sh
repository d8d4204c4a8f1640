#!/usr/bin/env bash
# A one-epoch training on the GPU, profiled, fixed (`fix --verify --apply`) and, for the wall-time comparison, run
# whole as the user wrote it: yolo11n.yaml, imgsz 640, batch 64, workers 2, epochs 1 on an 8,000-image synthetic JPEG
# dataset (125 steps: fewer than a measurement at 15 workers needs). Then the GPU tests.
#   bash bench/gpu_one_epoch.sh [SECONDS_TO_WAIT]   (repo root, yolodoctor and its dependencies installed)
# fix runs in its own process session (setsid): run the script again while fix still runs and it goes on waiting
# for it. What matters is copied to $OUT where it is set (else OUT_DIR/collected): fix.json, the three profiles, the logs, the trials'
# records.
set -uo pipefail
OUT_DIR=${OUT_DIR:-bench/out/one-epoch}
DATA_DIR=${DATA_DIR:-bench/out/ds8k}
WAIT=${1:-420}
ARGS=(model=yolo11n.yaml "data=$PWD/$DATA_DIR/data.yaml" imgsz=640 batch=64 workers=2 epochs=1 plots=False)
export YOLO_OFFLINE=1 PYTHONUNBUFFERED=1
mkdir -p "$OUT_DIR"
t_start=$(date +%s)
if [ ! -f "$DATA_DIR/.yolodoctor-dataset" ]; then
  python3 -m yolodoctor make-dataset "$DATA_DIR" --images "${IMAGES:-8000}" --force > /dev/null || exit 1
  echo "dataset: $(( $(date +%s) - t_start )) s"
fi
if [ ! -f "$OUT_DIR/fix.started" ]; then
  python3 -m yolodoctor profile "${ARGS[@]}" "project=$PWD/$OUT_DIR/ul" name=profile --out "$OUT_DIR/profile" --json \
    > "$OUT_DIR/profile.out.json" 2> "$OUT_DIR/profile.log"
  echo "profile rc=$?"
  date +%s > "$OUT_DIR/fix.started"
  setsid bash -c "python3 -m yolodoctor fix '$OUT_DIR/profile' --verify --apply --max-reps 2 --json \
    > '$OUT_DIR/fix.json' 2> '$OUT_DIR/fix.log'; echo \$? > '$OUT_DIR/fix.rc'; date +%s > '$OUT_DIR/fix.ended'" \
    < /dev/null > /dev/null 2>&1 &
fi
t0=$(date +%s)
while [ ! -f "$OUT_DIR/fix.rc" ] && [ $(( $(date +%s) - t0 )) -lt "$WAIT" ]; do sleep 5; done
if [ ! -f "$OUT_DIR/fix.rc" ]; then
  echo "fix still running after $(( $(date +%s) - $(cat "$OUT_DIR/fix.started") )) s: call again to wait"
  tail -3 "$OUT_DIR/fix.log"
  exit 3
fi
echo "fix rc=$(cat "$OUT_DIR/fix.rc") in $(( $(cat "$OUT_DIR/fix.ended") - $(cat "$OUT_DIR/fix.started") )) s"
if [ ! -f "$OUT_DIR/original/profile.json" ]; then  # the user's training as written, whole, for its wall time
  python3 -m yolodoctor profile "${ARGS[@]}" "project=$PWD/$OUT_DIR/ul" name=original --all --loader-seconds 0 \
    --out "$OUT_DIR/original" --json > /dev/null 2> "$OUT_DIR/original.log"
  echo "original rc=$?"
fi
if [ "${GPU_TESTS:-1}" = 1 ] && [ ! -f "$OUT_DIR/gpu-tests.log" ]; then
  python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu -o addopts="" > "$OUT_DIR/gpu-tests.log" 2>&1
  echo "gpu tests rc=$?"; tail -3 "$OUT_DIR/gpu-tests.log"
fi
C=${OUT:-$OUT_DIR/collected}
mkdir -p "$C"
cp "$OUT_DIR/fix.json" "$C/fix.json"
cp "$OUT_DIR/profile/profile.json" "$C/profile-defaults.json"
cp "$OUT_DIR/original/profile.json" "$C/profile-original.json" 2>/dev/null
applied=$(python3 -c "import json; a=json.load(open('$OUT_DIR/fix.json')).get('applied') or {}; print(a.get('run_dir') or '')")
[ -n "$applied" ] && cp "$applied/profile.json" "$C/profile-applied.json"
tail -c 200000 "$OUT_DIR/fix.log" > "$C/fix.log"
cp "$OUT_DIR/gpu-tests.log" "$C/" 2>/dev/null
tar czf "$C/trials.tar.gz" --exclude='*.pt' --exclude='trace*' -C "$OUT_DIR" $(cd "$OUT_DIR" && ls -d trials-* 2>/dev/null)
python3 bench/report_one_epoch.py "$C"
