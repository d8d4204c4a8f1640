#!/usr/bin/env bash
# Record the two-rank DDP fixtures on the CPU (gloo): fixtures/profiles/cpu-ddp2-balanced and cpu-ddp2-straggler.
# Both run fixtures/scripts/train_ddp_cpu.py under torch.distributed.run (torchrun) in script mode, 60 bounded steps, on a synthetic dataset
# of 640 JPEG images of 1920x1080 (decoding is a real part of each rank's step); the straggler's rank 1 runs no
# loader worker, so it decodes its images between its steps while rank 0's worker keeps its batches ready.
#   bash bench/cpu_ddp_fixtures.sh        (repo root; about a minute on 2 cores)
set -euo pipefail
PY=${PY:-python}
WORK=${WORK:-bench/out/cpu-ddp}
DEST=fixtures/profiles
export YOLO_OFFLINE=1
mkdir -p "$WORK"
[ -f "$WORK/ds/.yolodoctor-dataset" ] || $PY -m yolodoctor make-dataset "$WORK/ds" --images 640 --val-images 4 \
    --size 1920x1080 --format jpg --force > /dev/null
for what in balanced:1 straggler:0; do
  name=cpu-ddp2-${what%%:*}
  rm -rf "$WORK/$name"
  $PY -m yolodoctor profile --steps 60 --loader-seconds 0 --out "$WORK/$name" --json -- \
      "$($PY -c 'import sys; print(sys.executable)')" -m torch.distributed.run --nproc_per_node 2 fixtures/scripts/train_ddp_cpu.py "$WORK/ds/data.yaml" "$WORK/ul" 1 "${what##*:}" \
      > "$WORK/$name.json" || true
  rm -rf "${DEST:?}/$name" && mkdir -p "$DEST/$name"
  cp "$WORK/$name/profile.json" "$WORK/$name/spec.json" "$DEST/$name/"
  for f in "$WORK/$name"/events*.jsonl "$WORK/$name/samples.jsonl"; do gzip -9 -c "$f" > "$DEST/$name/$(basename "$f").gz"; done
  $PY - "$DEST/$name/profile.json" "$DEST/$name/spec.json" <<'PY'
import json, sys
# a fixture names no machine: the host and the interpreter's path are the recording machine's own
for f in sys.argv[1:]:
    d = json.load(open(f))
    if "host" in d:
        d["host"] = "cpu-host/"
    if d.get("command"):
        d["command"][0] = "python"
    json.dump(d, open(f, "w"), indent=1)
p = json.load(open(sys.argv[1]))
print(sys.argv[1], p["status"], round(p["summary"]["images_per_s"], 1), "images/s;",
      "; ".join(f"rank {r['rank']}: wait {1000 * r['wait_s_median']:.1f} ms, compute {1000 * r['compute_s_median']:.1f} ms, "
                f"workers {r.get('workers')}" for r in p["ranks"]))
PY
done
