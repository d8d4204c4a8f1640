#!/usr/bin/env bash
# Trainings whose facts once contradicted themselves, profiled again on the GPU (resumable: a profile already recorded
# is skipped): a batch halved after an out-of-memory (yolo11x.yaml imgsz=1280 batch=16 amp=False on an 80 GB card),
# AutoBatch at 95% (yolo11l.yaml imgsz=1280 batch=0.95), and batch=128 workers=14 cache=ram on the 8,000-image
# dataset. Each is diagnosed and checked against the invariants (bench/check_invariants.py); the run directories
# (streams gzipped, traces left out) go to $OUT/facts.tar.gz (OUT: a folder of your choice) for fixtures/profiles.
#   bash bench/gpu_facts.sh    (repo root, yolodoctor and its dependencies installed)
set -uo pipefail
OUT_DIR=${OUT_DIR:-bench/out/facts}
DATA_DIR=${DATA_DIR:-bench/out/ds8k}
export YOLO_OFFLINE=1 PYTHONUNBUFFERED=1
mkdir -p "$OUT_DIR"
if [ ! -f "$DATA_DIR/.yolodoctor-dataset" ]; then
  python3 -m yolodoctor make-dataset "$DATA_DIR" --images 8000 --force > /dev/null || exit 1
fi
DATA="data=$PWD/$DATA_DIR/data.yaml"
one() {  # name, train arguments...
  local name=$1; shift
  [ -f "$OUT_DIR/$name/profile.json" ] && grep -q '"finished": "' "$OUT_DIR/$name/profile.json" && return 0
  rm -rf "${OUT_DIR:?}/$name"
  local t=$(date +%s)
  python3 -m yolodoctor profile "$DATA" epochs=20 plots=False "project=$PWD/$OUT_DIR/ul" name="$name" "$@" \
    --loader-seconds 4 --out "$OUT_DIR/$name" --json > "$OUT_DIR/$name.json" 2> "$OUT_DIR/$name.log"
  echo "$name rc=$? in $(( $(date +%s) - t )) s"
}
one x1280-b16-fp32 model=yolo11x.yaml imgsz=1280 batch=16 amp=False
one l1280-autobatch95 model=yolo11l.yaml imgsz=1280 batch=0.95
one b128-w14-ram model=yolo11n.yaml imgsz=640 batch=128 workers=14 cache=ram
python3 bench/check_invariants.py "$OUT_DIR"/x1280-b16-fp32 "$OUT_DIR"/l1280-autobatch95 "$OUT_DIR"/b128-w14-ram \
  | tee "$OUT_DIR/invariants.txt"
C=${OUT:-$OUT_DIR/collected}
mkdir -p "$C"
for d in x1280-b16-fp32 l1280-autobatch95 b128-w14-ram; do
  [ -d "$OUT_DIR/$d" ] || continue
  (cd "$OUT_DIR/$d" && for f in events.jsonl samples.jsonl; do [ -f "$f" ] && gzip -kf "$f"; done)
done
tar czf "$C/facts.tar.gz" -C "$OUT_DIR" --exclude='*.jsonl' --exclude='trace*' --exclude='*.pt' \
  $(cd "$OUT_DIR" && ls -d x1280-b16-fp32 l1280-autobatch95 b128-w14-ram 2>/dev/null) invariants.txt
