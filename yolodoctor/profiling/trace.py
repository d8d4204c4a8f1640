"""A bounded torch.profiler window: a few steps traced, exported for Perfetto (gzip) and summarised at capture time.

The window covers the LAST steps of the profiled run: the last ``ACTIVE`` steps of a bounded profile, or of the
planned run (epochs x batches) when the whole training is profiled. Measured on an H200 (BENCHMARKS.md, profiler
overhead): after a CUDA trace window ends, a launch-bound training can stay about 30% slower for the rest of the
process (CUPTI does not fully detach), so a window early in the run distorted every step after it. At the end it
touches nothing that is measured. It is skipped under compile='reduce-overhead': a profiler started after CUDA-graph
capture can fail.

Events are read through torch.profiler's own API (``prof.events()``); ``summarise`` works on plain records so that
it can be tested without a GPU.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yolodoctor.record import bounds

ACTIVE = bounds.ACTIVE
SHORT_KERNEL_US = 10.0
LAUNCH_CALLS = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx", "cudaGraphLaunch",
                "cudaLaunchCooperativeKernel")
SYNC_CALLS = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaStreamWaitEvent",
              "aten::_local_scalar_dense", "aten::item")
# Kernel names that run on tensor cores (cuBLAS/cuDNN/CUTLASS/Triton naming on Volta..Hopper)
TENSOR_CORE = re.compile(r"(xmma|hmma|wgmma|gmma|tensorop|s1688|s16816|h1688|h16816|i8816|bf16.*gemm|"
                         r"cutlass.*(tensorop|sm80|sm90)|sm90_.*gemm|sm80_.*gemm|_tc_|mma)", re.IGNORECASE)


@dataclass(frozen=True)
class Ev:
    name: str
    device: str  # "cpu" | "cuda"
    start_us: float
    dur_us: float
    self_cpu_us: float = 0.0


def records_from_profiler(prof: Any) -> list[Ev]:
    out = []
    for e in prof.events():
        if getattr(e, "is_user_annotation", False):  # e.g. "Optimizer.step#AdamW.step" ranges on the GPU timeline
            continue
        dev = "cuda" if str(e.device_type).endswith("CUDA") else "cpu"
        tr = e.time_range
        out.append(Ev(e.name, dev, float(tr.start), float(tr.end - tr.start),
                      float(getattr(e, "self_cpu_time_total", 0.0) or 0.0)))
    return out


def _union_us(intervals: Iterable[tuple[float, float]]) -> float:
    total = 0.0
    cur: tuple[float, float] | None = None  # the interval being merged
    for s, e in sorted(intervals):
        if cur is None or s > cur[1]:
            if cur is not None:
                total += cur[1] - cur[0]
            cur = (s, e)
        else:
            cur = (cur[0], max(cur[1], e))
    if cur is not None:
        total += cur[1] - cur[0]
    return total


def is_memcpy(name: str) -> bool:
    return name.startswith("Memcpy") or name.startswith("Memset")


def summarise(events: list[Ev], steps: int, wall_s: float | None = None) -> dict[str, Any]:
    """Facts of the traced window, per step. Kernel facts are None when no CUDA activity was recorded."""
    steps = max(steps, 1)
    kernels = [e for e in events if e.device == "cuda" and not is_memcpy(e.name)]
    copies = [e for e in events if e.device == "cuda" and is_memcpy(e.name)]
    cpu = [e for e in events if e.device == "cpu"]
    launches = [e for e in cpu if e.name in LAUNCH_CALLS]
    syncs = Counter(e.name for e in cpu if e.name in SYNC_CALLS)
    out: dict[str, Any] = {"steps": steps, "wall_s": wall_s, "cuda": bool(kernels)}
    op_time: dict[str, float] = defaultdict(float)
    op_count: Counter = Counter()
    for e in cpu:
        if e.name.startswith("aten::"):
            op_time[e.name] += e.self_cpu_us
            op_count[e.name] += 1
    out["cpu_ops_per_step"] = sum(op_count.values()) / steps
    out["top_cpu_ops"] = [{"name": n, "self_cpu_ms": round(t / 1000, 3), "count": op_count[n]}
                          for n, t in sorted(op_time.items(), key=lambda kv: -kv[1])[:10]]
    out["sync_calls_per_step"] = {k: v / steps for k, v in sorted(syncs.items())}
    out["launch_cpu_ms_per_step"] = sum(e.dur_us for e in launches) / 1000 / steps
    out["launches_per_step"] = len(launches) / steps
    if not kernels:
        for key in ("kernels_per_step", "kernel_busy_ms_per_step", "short_kernel_share", "short_kernel_time_share",
                    "tensor_core_share", "top_kernels", "h2d_pageable_mb_per_step", "h2d_pinned_mb_per_step",
                    "nccl_ms_per_step", "nccl_share"):
            out[key] = None
        return out
    ktime = sum(k.dur_us for k in kernels)
    short = [k for k in kernels if k.dur_us < SHORT_KERNEL_US]
    tc = sum(k.dur_us for k in kernels if TENSOR_CORE.search(k.name))
    by_name: dict[str, list[float]] = defaultdict(list)
    for k in kernels:
        by_name[k.name].append(k.dur_us)
    out.update({
        "kernels_per_step": len(kernels) / steps,
        "kernel_busy_ms_per_step": _union_us((k.start_us, k.start_us + k.dur_us) for k in kernels) / 1000 / steps,
        "kernel_sum_ms_per_step": ktime / 1000 / steps,
        "short_kernel_share": len(short) / len(kernels),
        "short_kernel_time_share": sum(k.dur_us for k in short) / ktime if ktime else 0.0,
        "tensor_core_share": tc / ktime if ktime else 0.0,
        "top_kernels": [{"name": n[:160], "ms_per_step": round(sum(d) / 1000 / steps, 4), "count": len(d)}
                        for n, d in sorted(by_name.items(), key=lambda kv: -sum(kv[1]))[:10]],
        "memcpy_per_step": {k: v / steps for k, v in Counter(_copy_kind(c.name) for c in copies).items()},
    })
    # DDP's collectives (gradient all-reduce, broadcasts) run as NCCL kernels, overlapped with the backward pass where
    # DDP can: what they add is their time not covered by any other kernel - the GPU exchanging (or waiting for the
    # other ranks) rather than computing
    busy = out["kernel_busy_ms_per_step"] * steps * 1000
    compute = _union_us((k.start_us, k.start_us + k.dur_us) for k in kernels if "nccl" not in k.name.lower())
    exposed = max(0.0, busy - compute)
    out["nccl_ms_per_step"] = exposed / 1000 / steps
    out["nccl_share"] = exposed / busy if busy else 0.0
    if wall_s:
        out["gpu_busy_share"] = min(1.0, out["kernel_busy_ms_per_step"] * steps / 1000 / wall_s)
    return out


def _copy_kind(name: str) -> str:
    if "HtoD" in name:
        return "h2d_pageable" if "Pageable" in name else "h2d_pinned" if "Pinned" in name else "h2d"
    if "DtoH" in name:
        return "d2h_pageable" if "Pageable" in name else "d2h_pinned" if "Pinned" in name else "d2h"
    return "memset" if name.startswith("Memset") else "other"


QUIET_KINETO = "6"


class TraceWindow:
    """Drive torch.profiler around steps [start, start + active) from the recorder's step hooks."""

    def __init__(self, run_dir: Path, *, start: int | None = None, active: int = ACTIVE, cuda: bool = False,
                 on_done: Callable[[dict[str, Any]], None] | None = None, quiet: bool = True) -> None:
        self.run_dir = Path(run_dir)
        self.quiet = quiet  # silence the profiler library's own log lines (--debug keeps them)
        self.start, self.active, self.cuda = start, active, cuda
        self.on_done = on_done
        self.prof: Any = None  # the torch.profiler.profile while the window is open
        self.done = False
        self.skipped: str | None = None
        self.t0 = 0.0

    def place_at_end(self, last_step: int) -> None:
        """Trace the steps ending with ``last_step`` (0-based index of the run's last step)."""
        self.active = max(1, min(ACTIVE, last_step + 1))
        self.start = last_step + 1 - self.active

    def skip(self, reason: str) -> None:
        self.skipped = reason
        self.done = True

    def before_step(self, step: int) -> None:
        if self.done or self.prof is not None or self.start is None or step != self.start:
            return
        import time

        import torch
        from torch.profiler import ProfilerActivity, profile

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        if self.quiet:
            # kineto reads its log level when the profiler starts; Ultralytics sets 5 at import, which still prints
            # profiler_start/stop lines (USDT, level 5): 6 is above every level it has
            os.environ["KINETO_LOG_LEVEL"] = QUIET_KINETO
        if self.cuda:
            torch.cuda.synchronize()
        self.prof = profile(activities=acts, record_shapes=False, with_stack=False, profile_memory=False)
        self.prof.__enter__()
        self.t0 = time.monotonic()

    def after_step(self, step: int) -> None:
        if self.prof is None or self.done or self.start is None or step < self.start + self.active - 1:
            return
        import time

        import torch

        if self.cuda:
            torch.cuda.synchronize()
        wall = time.monotonic() - self.t0
        self.prof.__exit__(None, None, None)
        self.done = True
        result: dict[str, Any] = {"first_step": self.start, "steps": self.active, "wall_s": wall}
        try:
            result["summary"] = summarise(records_from_profiler(self.prof), self.active, wall)
        except Exception as e:  # a summary must never break the training
            result["summary_error"] = f"{type(e).__name__}: {e}"
        try:
            result["file"] = export_gz(self.prof, self.run_dir / "trace.json.gz")
        except Exception as e:
            result["export_error"] = f"{type(e).__name__}: {e}"
        self.prof = None
        if self.on_done:
            self.on_done(result)


def export_gz(prof: Any, dest: Path) -> str:
    tmp = dest.with_suffix("")  # trace.json
    try:
        prof.export_chrome_trace(str(tmp))
        with open(tmp, "rb") as src, gzip.open(dest, "wb", compresslevel=1) as dst:
            shutil.copyfileobj(src, dst)
    finally:  # a full disk mid-copy must not leave the uncompressed trace (tens of MB) behind
        tmp.unlink(missing_ok=True)
    return dest.name
