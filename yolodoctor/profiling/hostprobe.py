"""The host's own speed right now, in about half a second: a fixed single-thread Python loop (what a host-bound,
launch-bound training thread does), a JPEG decode with OpenCV (what a loader worker does) and a 64 MiB memory copy.

On a shared machine the host's speed moves: on the NVIDIA H200 virtual machines of BENCHMARKS.md the loop took 14-18 ms
or 23-30 ms with the machine idle, switching within a minute, and a launch-bound configuration's rate moved with it.
`fix --verify` times the loop before each trial, so that a verdict on a small gain can be read against the machine's
own drift; the benchmarks time it around each run.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

LOOP_N = 300_000


def _median_ms(fn: Callable[[], Any], reps: int) -> float:
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(1000 * (time.perf_counter() - t))
    return statistics.median(ts)


def python_ms(reps: int = 5) -> float:
    """Median time of a fixed pure-Python loop, ms (single thread, holds the GIL)."""
    return round(_median_ms(lambda: sum(i * i for i in range(LOOP_N)), reps), 2)


def record() -> dict[str, float] | None:
    """What a run directory keeps of it (profile.json host_probe before/after): the loop, or None where it failed -
    a fact, never an error."""
    try:
        return {"python_ms": python_ms(reps=3)}
    except Exception:
        return None


def measure(reps: int = 5) -> dict[str, float | None]:
    """python_ms, jpeg_decode_ms (None without OpenCV) and memcpy_gbps (None without numpy)."""
    out: dict[str, float | None] = {"python_ms": python_ms(reps), "jpeg_decode_ms": None, "memcpy_gbps": None}
    try:
        import numpy as np
    except ImportError:
        return out
    src = np.ones(64 << 20, dtype=np.uint8)
    dst = np.empty_like(src)
    out["memcpy_gbps"] = round((64 << 20) / 1e6 / _median_ms(lambda: np.copyto(dst, src), reps), 2)
    try:
        import cv2
    except ImportError:
        return out
    jpeg = cv2.imencode(".jpg", np.random.default_rng(0).integers(0, 255, (480, 640, 3), dtype=np.uint8))[1]
    out["jpeg_decode_ms"] = round(_median_ms(lambda: [cv2.imdecode(jpeg, cv2.IMREAD_COLOR) for _ in range(10)],
                                             reps) / 10, 3)
    return out


MOVED = 0.15  # the host probe moving more than this (slowest over fastest, minus one) is worth a word


def moved(values: list[float | None]) -> float | None:
    """How much the host's speed moved over these loop times: slowest / fastest - 1 (None with fewer than two)."""
    v = [x for x in values if isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0]
    return max(v) / min(v) - 1 if len(v) >= 2 else None
