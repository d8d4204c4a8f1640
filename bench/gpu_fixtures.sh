#!/usr/bin/env bash
# The recorded H200 profiles (fixtures/profiles/h200-*), the profiler overhead and the GPU tests, in parts.
# Resumable: each part writes its result under $OUT_DIR and is skipped when that result exists, so a part cut off
# (by a time limit on the command, say) goes on where it stopped the next time it is run on the same machine.
#   PART=fixtures|compile|scenarios|overhead|inrun|gputests bash bench/gpu_fixtures.sh
# (repo root, yolodoctor and its dependencies installed: the CEL package imports prompt_toolkit; bench/monitor_headless.py
# needs textual). Parts:
#   fixtures   Ultralytics defaults, workers=0, amp=False
#   compile    batch=64 workers=16 compile=reduce-overhead (about 130 s of compilation)
#   scenarios  recorded after the rules were frozen: CPU-saturated loader (batch=128 workers=16 on 16 cores), large
#              PNG images (1920x1080), a large model at 90% of GPU memory (yolo11x.yaml batch=0.9)
#   overhead   plain training vs `yolodoctor profile`, interleaved (bench/profiler_overhead.py)
#   inrun      the sampler switched on and off inside each profiled run (between-run noise removed)
#   gputests   the pytest -m gpu tests
set -uo pipefail
OUT_DIR=${OUT_DIR:-bench/out/gpu3}
DATA_DIR=${DATA_DIR:-bench/out/ds8k}
PNG_DIR=${PNG_DIR:-bench/out/png2k}
IMAGES=${IMAGES:-8000}
mkdir -p "$OUT_DIR"
export YOLO_OFFLINE=1 PYTHONUNBUFFERED=1
yd() { python3 -m yolodoctor "$@"; }

dataset() {  # dir, make-dataset options...
  local dir=$1; shift
  if [ ! -f "$dir/.yolodoctor-dataset" ] || ! grep -q '"complete": true' "$dir/.yolodoctor-dataset"; then
    local t; t=$(date +%s); yd make-dataset "$dir" "$@" --force || exit 1
    echo "dataset $dir: $(( $(date +%s) - t )) s"
  fi
}
dataset "$DATA_DIR" --images "$IMAGES"
DATA="$PWD/$DATA_DIR/data.yaml"
COMMON=(imgsz=640 epochs=20 plots=False "project=$PWD/$OUT_DIR/ul")

profile_one() {  # name, data.yaml, extra args...
  local name=$1 data=$2; shift 2
  [ -f "$OUT_DIR/$name/profile.json" ] && grep -q '"finished": "' "$OUT_DIR/$name/profile.json" && return 0
  rm -rf "${OUT_DIR:?}/$name"
  local t0; t0=$(date +%s.%N)
  local model=model=yolo11n.yaml; [[ " $* " == *" model="* ]] && model=
  yd profile ${model:+"$model"} "${COMMON[@]}" "data=$data" "$@" --out "$OUT_DIR/$name" --json > "$OUT_DIR/$name.json" 2> "$OUT_DIR/$name.log"
  local rc=$?
  echo "{\"name\": \"$name\", \"rc\": $rc, \"wall_s\": $(python3 -c "print(round($(date +%s.%N) - $t0, 2))")}" >> "$OUT_DIR/walls.jsonl"
  echo "$name rc=$rc"; tail -3 "$OUT_DIR/$name.log"
}

case "${PART:-fixtures}" in
  fixtures)
    profile_one defaults "$DATA"
    profile_one workers0 "$DATA" workers=0
    profile_one fp32 "$DATA" amp=False
    ;;
  compile)
    profile_one b64w16-reduce-overhead "$DATA" batch=64 workers=16 compile=reduce-overhead
    ;;
  scenarios)
    profile_one b128w16-cpu-saturated "$DATA" batch=128 workers=16
    dataset "$PNG_DIR" --images 2000 --val-images 100 --format png --size 1920x1080
    profile_one png-1080p "$PWD/$PNG_DIR/data.yaml"
    profile_one yolo11x-autobatch90 "$DATA" model=yolo11x.yaml batch=0.9 --steps 50
    ;;
  overhead)
    [ -f "$OUT_DIR/overhead/overhead.json" ] || python3 bench/profiler_overhead.py --data "$DATA" \
      --out "$OUT_DIR/overhead" --reps "${REPS:-3}" --steps "${STEPS:-140}" --configs "${CONFIGS:-plain,full}"
    ;;
  inrun)  # the sampler's cost inside one run (on/off blocks of 3 s), and the recorder's own time per step
    [ -f "$OUT_DIR/inrun/overhead.json" ] || python3 bench/profiler_overhead.py --data "$DATA" \
      --out "$OUT_DIR/inrun" --reps "${REPS:-3}" --steps 400 --configs duty
    ;;
  gputests)
    [ -f "$OUT_DIR/gputests.log" ] || python3 -m pytest -m gpu -q -p no:cacheprovider tests/gpu > "$OUT_DIR/gputests.log" 2>&1
    tail -5 "$OUT_DIR/gputests.log"
    ;;
esac
