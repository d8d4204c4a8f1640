"""How many steps a bounded profile runs by default, and which of them form the steady-state window.

Ultralytics' train loader prefetches ``workers x 4`` batches before the first step and keeps that many in flight.
A window inside that depth measures the queue, not the pipeline (DESIGN.md section 4). So:

  default steps = max(MIN_STEPS, SETTLE + 3 x depth) + TRACE, depth = workers x prefetch_factor
  steady window = the steps after SETTLE + depth: the queue filled during start-up has been drained once and
                  the window spans two more queue depths, long enough for the loader's real rate to show;
  trace window  = the last TRACE steps (trace.py says why it comes last); they are left out of the steady window.
"""

from __future__ import annotations

SETTLE = 20  # first steps: allocator growth, cuDNN/algorithm selection, lazy init
MIN_STEPS = 30
PREFETCH_FACTOR = 4


def prefetch_depth(workers: int, prefetch_factor: int | None = PREFETCH_FACTOR) -> int:
    return workers * (prefetch_factor or 0) if workers > 0 else 0


def default_steps(workers: int, prefetch_factor: int | None = PREFETCH_FACTOR) -> int:
    from yolodoctor.profiling.trace import ACTIVE

    return max(MIN_STEPS, SETTLE + 3 * prefetch_depth(workers, prefetch_factor)) + ACTIVE


def window_start(workers: int, prefetch_factor: int | None = PREFETCH_FACTOR) -> int:
    return SETTLE + prefetch_depth(workers, prefetch_factor)
