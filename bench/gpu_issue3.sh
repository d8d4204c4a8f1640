#!/usr/bin/env bash
# Issue 3 on the H200: record the four profile fixtures, the profiler overhead and the time to a written profile.
# Resumable: each part writes its result under $OUT_DIR and is skipped when that result exists.
#   PART=fixtures|overhead|compile bash bench/gpu_issue3.sh      (run from the repo root, wheels installed)
set -uo pipefail
OUT_DIR=${OUT_DIR:-bench/out/gpu3}
DATA_DIR=${DATA_DIR:-bench/out/ds8k}
IMAGES=${IMAGES:-8000}
mkdir -p "$OUT_DIR"
export YOLO_OFFLINE=1 PYTHONUNBUFFERED=1
yd() { python3 -m yolodoctor "$@"; }

if [ ! -f "$DATA_DIR/.yolodoctor-dataset" ] || ! grep -q '"complete": true' "$DATA_DIR/.yolodoctor-dataset"; then
  t=$(date +%s); yd make-dataset "$DATA_DIR" --images "$IMAGES" --force || exit 1
  echo "dataset: $(( $(date +%s) - t )) s"
fi
DATA="$PWD/$DATA_DIR/data.yaml"
COMMON=(model=yolo11n.yaml "data=$DATA" imgsz=640 epochs=20 plots=False "project=$PWD/$OUT_DIR/ul")

profile_one() {  # name, extra args...
  local name=$1; shift
  [ -f "$OUT_DIR/$name/profile.json" ] && grep -q '"finished": "' "$OUT_DIR/$name/profile.json" && return 0
  rm -rf "${OUT_DIR:?}/$name"
  local t0; t0=$(date +%s.%N)
  yd profile "${COMMON[@]}" "$@" --out "$OUT_DIR/$name" --json > "$OUT_DIR/$name.json" 2> "$OUT_DIR/$name.log"
  local rc=$?
  echo "{\"name\": \"$name\", \"rc\": $rc, \"wall_s\": $(python3 -c "print(round($(date +%s.%N) - $t0, 2))")}" >> "$OUT_DIR/walls.jsonl"
  echo "$name rc=$rc"; tail -3 "$OUT_DIR/$name.log"
}

case "${PART:-fixtures}" in
  fixtures)
    profile_one defaults
    profile_one workers0 workers=0
    profile_one fp32 amp=False
    ;;
  compile)
    profile_one b64w16-reduce-overhead batch=64 workers=16 compile=reduce-overhead
    ;;
  overhead)
    [ -f "$OUT_DIR/overhead/overhead.json" ] || python3 bench/profiler_overhead.py --data "$DATA" --out "$OUT_DIR/overhead" --reps "${REPS:-3}"
    ;;
esac
