#!/usr/bin/env bash
# How close `fix --verify --apply` gets to the best configuration on a GPU machine, in slices of at most BUDGET
# seconds (bench/h200_benchmark.py's docstring lists the parts, their commands and how long each takes). From the
# repo root, with yolodoctor and its dependencies installed:
#   bash bench/h200_benchmark.sh PART... [OPTIONS]    BUDGET=540 by default: no unit starts that would end after it
# Results: one small JSON per part in bench/results/h200-benchmark/ (committed; read on resume). Where OUT is set (a
# folder to collect the results in, when the GPU machine is not where the repository is committed), the runner
# works on a copy in bench/out/h200-results/ instead, seeded from the committed results (RESEED=1: again, after
# editing them) and kept in git-ignored bench/out/ so that the next command on the same machine resumes from it,
# and packs it under the committed path into $OUT/h200-results.tgz (logs: $OUT/h200-logs.tgz). In the repository:
#   tar xzf h200-results.tgz          (restores bench/results/h200-benchmark/; commit it)
# Exit 3 (or 124/143, stopped at HARD_LIMIT=570 s): not finished - run the same command again; while `fix` runs
# detached, on the same machine.
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
# timeout: a unit that overruns its estimate is stopped (and redone next time) at HARD_LIMIT, so that what finished
# is still packed below
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
