#!/usr/bin/env bash
# Record the classification fixture on the CPU: fixtures/profiles/cpu-classify-png-decode. A classification
# training (data=FOLDER, yolo11n-cls.yaml, imgsz 64, batch 8, 5 epochs) on 64 synthetic 960x720 PNGs of 3 classes,
# decoded in the training process (Ultralytics loads in-process on the CPU): decode-bound, so DL204 proposes
# cache='ram'. Args mode, a bounded profile without the loader's own timing.
#   bash bench/cpu_classify_fixture.sh        (repo root; under a minute on 2 cores)
set -euo pipefail
PY=${PY:-python}
WORK=${WORK:-bench/out/cpu-classify}
DEST=fixtures/profiles
name=cpu-classify-png-decode
export YOLO_OFFLINE=1
mkdir -p "$WORK"
[ -d "$WORK/ds/train" ] || $PY -m yolodoctor make-dataset "$WORK/ds" --task classify --images 64 --val-images 3 \
    --format png --size 960x720 --force > /dev/null
rm -rf "$WORK/$name"
$PY -m yolodoctor profile "data=$WORK/ds" model=yolo11n-cls.yaml imgsz=64 batch=8 epochs=5 plots=False \
    "project=$WORK/ul" --loader-seconds 0 --out "$WORK/$name" --json > "$WORK/$name.json" || true
rm -rf "${DEST:?}/$name" && mkdir -p "$DEST/$name"
cp "$WORK/$name/profile.json" "$WORK/$name/spec.json" "$DEST/$name/"
for f in "$WORK/$name/events.jsonl" "$WORK/$name/samples.jsonl"; do gzip -9 -c "$f" > "$DEST/$name/$(basename "$f").gz"; done
$PY - "$DEST/$name/profile.json" "$DEST/$name/spec.json" <<'PY'
import json, sys
# a fixture names no machine: the host is the recording machine's own
for f in sys.argv[1:]:
    d = json.load(open(f))
    if "host" in d:
        d["host"] = "cpu-host/"
    json.dump(d, open(f, "w"), indent=1)
p = json.load(open(sys.argv[1]))
print(sys.argv[1], p["status"], round(p["summary"]["images_per_s"], 1), "images/s")
PY
