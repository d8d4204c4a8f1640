"""Benchmark (GPU): what reading the caching allocator's counters costs the training thread, per step.

    python bench/recorder_cost.py [--reps 7] [--calls 2000] [--out FILE.json]

The recorder writes three allocator counters a step (resting size, the step's peak, reserved) and resets the peak.
`torch.cuda.memory_allocated()`, `max_memory_allocated()` and `memory_reserved()` each build and flatten the whole
stats dict; yolodoctor reads the nested dict once (recorder.allocator_counters). This times both ways, interleaved
A B A B in one process, after allocating a few hundred tensors of mixed sizes (so that the allocator has real
pools), and prints the median microseconds per step and the spread over repetitions.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    import torch

    from yolodoctor.profiling.recorder import allocator_counters

    assert torch.cuda.is_available(), "needs a CUDA GPU"
    cuda = torch.cuda
    keep = [torch.empty(int(n), device="cuda") for n in (2 ** (k % 22) for k in range(400))]

    def torch_calls() -> dict:
        r = {"mem_allocated": cuda.memory_allocated(), "mem_allocated_peak": cuda.max_memory_allocated(),
             "mem_reserved": cuda.memory_reserved()}
        cuda.reset_peak_memory_stats()
        return r

    def nested() -> dict:
        r = allocator_counters(cuda)
        cuda.reset_peak_memory_stats()
        return r

    assert torch_calls() == nested(), "the two ways must read the same counters"
    us: dict[str, list[float]] = {"torch_calls": [], "nested": []}
    for _ in range(a.reps):
        for name, fn in (("torch_calls", torch_calls), ("nested", nested)):
            t = time.perf_counter()
            for _ in range(a.calls):
                fn()
            us[name].append(1e6 * (time.perf_counter() - t) / a.calls)
    res = {"gpu": cuda.get_device_name(), "torch": torch.__version__, "tensors": len(keep), "reps": a.reps,
           "calls": a.calls, **{k: {"median_us": statistics.median(v), "min_us": min(v), "max_us": max(v)}
                                for k, v in us.items()}}
    res["ratio"] = res["torch_calls"]["median_us"] / res["nested"]["median_us"]
    print(json.dumps(res, indent=1))
    if a.out:
        a.out.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
