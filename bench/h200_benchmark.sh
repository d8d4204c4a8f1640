#!/usr/bin/env bash
# Issue 6 on the H200, in slices (bench/h200_benchmark.py's docstring lists the parts, the commands and their GPU
# minutes). From the repo root, with the wheels installed first (bench/gpu_fixtures.sh's header):
#   bash bench/h200_benchmark.sh PART... [OPTIONS]    BUDGET=540 by default: no unit starts that would end after it
# Results: one small JSON per part in bench/results/h200-benchmark/ (committed; read on resume). Where the device
# tool's $OUT is set, the runner works on a copy in bench/out/h200-results/ instead: each device call copies the
# working tree afresh (the committed results included) while git-ignored bench/out/ stays on a warm machine, so a
# second call on the same machine resumes from what the first one recorded even before it is unpacked here. The
# copy is seeded from the committed results on a fresh machine (RESEED=1: again, after editing them here) and packed
# back under the committed path into $OUT/h200-results.tgz (logs: $OUT/h200-logs.tgz). Back here:
#   tar xzf <files_at>/h200-results.tgz          (restores bench/results/h200-benchmark/; commit it)
# Exit 3 (or 124/143, stopped at HARD_LIMIT=570 s): not finished - run the same command again; while `fix` runs
# detached, within 30 s so that the machine stays.
set -uo pipefail
export YOLO_OFFLINE=1 PYTHONUNBUFFERED=1
COMMITTED=bench/results/h200-benchmark
SEEDED=""
if [ -n "${OUT:-}" ] && [ -z "${RESULTS:-}" ]; then
  RESULTS=bench/out/h200-results SEEDED=1
  # RESEED=1: start again from the committed results (after editing them here while the machine stayed warm)
  [ -n "${RESEED:-}" ] && rm -rf "$RESULTS"
  [ -d "$RESULTS" ] || { mkdir -p "$RESULTS" && cp -r "$COMMITTED"/. "$RESULTS"/ 2>/dev/null; }
fi
RESULTS=${RESULTS:-$COMMITTED}
WORK=${WORK:-bench/out/h200}
mkdir -p "$WORK"
# timeout: a unit that overruns its estimate is stopped (and redone next time) before the device's 10-minute limit,
# so that what finished is still packed below
timeout -s TERM "${HARD_LIMIT:-570}" python3 bench/h200_benchmark.py run "$@" --budget-s "${BUDGET:-540}" \
  --results "$RESULTS" --work "$WORK" 2>&1 | tee -a "$WORK/runner.log"
rc=${PIPESTATUS[0]}
if [ -n "${OUT:-}" ] && [ -d "$RESULTS" ]; then
  if [ -n "$SEEDED" ]; then  # packed under the committed path: `tar xzf` here restores it
    tar czf "$OUT/h200-results.tgz" --transform "s|^${RESULTS%/}|$COMMITTED|" "${RESULTS%/}"
  else  # a results folder named by hand keeps its own name
    tar czf "$OUT/h200-results.tgz" "${RESULTS%/}"
  fi
  # step events too (fix trials, sweep points): how a rate measured over a few seconds varies within one run
  find "$WORK" \( -name '*.log' -o -name '*.pyspy.*.txt' -o -name 'events.jsonl' \) -size -4M -not -path '*/ul/*' \
    | tar czf "$OUT/h200-logs.tgz" -T -
  ls -l "$OUT"
fi
python3 bench/report_h200.py --results "$RESULTS" | sed -n '/^| figure/,/^$/p'
exit "$rc"
