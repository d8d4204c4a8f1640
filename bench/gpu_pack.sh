#!/usr/bin/env bash
# Pack what came out of bench/gpu_fixtures.sh into one archive (to copy it off the GPU machine).
OUT_DIR=${OUT_DIR:-bench/out/gpu3}
DEST=${1:?destination .tgz}
cd "$OUT_DIR" || exit 1
tar czf "$DEST" --exclude='ul' --exclude='*/ul' --exclude='*.pt' . 2>/dev/null
ls -la "$DEST"
