"""Memory and dataloader probe: cores really available, Ultralytics' worker clamp, RAM for cache='ram',
/dev/shm and pinned memory for the prefetch queue.

Finding ids:
  DL101 workers-above-cores      warning  (dataloader) more loader processes than usable cores
  DL102 workers-clamped          info     (dataloader) Ultralytics runs fewer workers than asked
  MM101 cache-ram-short          warning  (memory) cache='ram' needs more RAM than available: Ultralytics trains uncached
  MM102 shm-too-small            error    (memory) /dev/shm cannot hold the prefetched batches: workers crash
  MM103 cache-copied-per-worker  warning  (memory) /dev/shm too small to share the RAM cache: each worker copies it
  MM104 pinned-memory-large      warning  (memory) the pinned prefetch queue takes a large share of RAM
"""

from __future__ import annotations

import math
import os
from typing import Any

from yolodoctor.api import system
from yolodoctor.check.probe import ProbeResult
from yolodoctor.findings import Finding, Fix, Severity

PREFETCH_FACTOR = 4  # Ultralytics' train loader (data/build.py)
CACHE_SAFETY_MARGIN = 1.0  # Ultralytics' check_cache_ram default: require twice the estimate
PINNED_RAM_SHARE = 0.25  # warn when the pinned prefetch queue would take more than this share of available RAM
GB = 1 << 30


def cache_bytes_per_image(width: int, height: int, imgsz: int) -> int:
    """Bytes one image takes in cache='ram': Ultralytics' load_image resizes the long side to imgsz (uint8 BGR)."""
    r = imgsz / max(width, height)
    w, h = min(math.ceil(width * r), imgsz), min(math.ceil(height * r), imgsz)
    return w * h * 3


def batch_bytes(batch: int, imgsz: int) -> int:
    """A collated train batch: batch x 3 x imgsz x imgsz uint8 (mosaic and letterbox output is imgsz square)."""
    return batch * 3 * imgsz * imgsz


def effective_workers(workers: int, *, cpu_count: int, cuda_devices: int, device_kind: str, images: int | None,
                      batch: int | None) -> int:
    """Ultralytics' clamp: workers=0 on CPU/MPS, else min(cpu_count // devices, workers, batches per epoch)."""
    if device_kind in ("cpu", "mps"):
        return 0
    batches = math.ceil(images / batch) if images and batch and batch > 0 else None
    nw = min(cpu_count // max(cuda_devices, 1), workers)
    if batches is not None:
        nw = min(nw, 0 if batches <= 1 else batches)
    return max(nw, 0)


def probe_resources(args: dict[str, Any], facts: dict[str, Any], *, cpu_count: int | None = None,
                    usable: float | None = None, mem: dict[str, int | None] | None = None,
                    shm_free: int | None | str = "probe") -> ProbeResult:
    """``facts`` are those already gathered (environment, dataset). Keyword arguments let tests fake the machine."""
    res = ProbeResult()
    f = res.facts
    cpu_count = cpu_count if cpu_count is not None else (os.cpu_count() or 1)
    quota = system.cgroup_cpu_quota()
    f["cpu.count"] = cpu_count
    f["cpu.affinity"] = system.affinity_cpus()
    f["cpu.quota"] = quota
    f["cpu.usable"] = usable if usable is not None else system.usable_cpus(quota)
    mem = mem if mem is not None else system.memory()
    f["ram.total"], f["ram.available"] = mem["total"], mem["available"]
    shm = system.disk_free("/dev/shm") if shm_free == "probe" else shm_free
    f["shm.free"] = shm

    imgsz = int(args.get("imgsz") or 640) if not isinstance(args.get("imgsz"), (list, tuple)) else max(args["imgsz"])
    batch = args.get("batch", 16)
    batch = int(batch) if isinstance(batch, int) and batch > 0 else None  # -1 / fractions: AutoBatch decides
    workers = int(args.get("workers", 8))
    device_kind = facts.get("env.device_kind", "cpu")
    n_train = facts.get("dataset.images.train")
    nw = effective_workers(workers, cpu_count=cpu_count, cuda_devices=len(facts.get("env.torch_devices") or []),
                           device_kind=device_kind, images=n_train, batch=batch)
    f["loader.workers_requested"] = workers
    f["loader.workers_effective"] = nw
    f["loader.batch"] = batch
    f["loader.imgsz"] = imgsz
    _worker_findings(res, workers, nw, device_kind)
    if batch and nw > 0:
        queued = nw * PREFETCH_FACTOR * batch_bytes(batch, imgsz)
        f["loader.prefetch_batches"] = nw * PREFETCH_FACTOR
        f["loader.prefetch_bytes"] = queued
        _queue_findings(res, queued, nw, batch, imgsz, shm, mem["available"])
    _cache_findings(res, args, facts, imgsz, nw, shm, mem["available"])
    return res


def _worker_findings(res: ProbeResult, workers: int, nw: int, device_kind: str) -> None:
    f = res.facts
    usable = f["cpu.usable"]
    if nw > usable:
        limit = "cgroup CPU quota" if f["cpu.quota"] and f["cpu.quota"] < f["cpu.affinity"] else "CPU affinity"
        suggested = max(int(usable) - 1, 1)
        res.findings.append(Finding(
            "DL101", "workers-above-cores", "dataloader", Severity.warning,
            f"{nw} loader workers will share {usable:g} usable cores ({limit}; os.cpu_count() says {f['cpu.count']},"
            " which is what Ultralytics reads): the workers and the training thread will compete for CPU.",
            evidence={"workers_effective": nw, "usable_cpus": usable, "cpu_count": f["cpu.count"],
                      "quota": f["cpu.quota"], "affinity": f["cpu.affinity"]},
            fix=Fix(args={"workers": suggested}),
        ))
    elif device_kind == "cuda" and 0 < nw < workers:
        res.findings.append(Finding(
            "DL102", "workers-clamped", "dataloader", Severity.info,
            f"workers={workers} but Ultralytics will start {nw} (os.cpu_count() per GPU, and batches per epoch).",
            evidence={"workers_requested": workers, "workers_effective": nw, "cpu_count": f["cpu.count"]},
        ))


def _queue_findings(res: ProbeResult, queued: int, nw: int, batch: int, imgsz: int, shm: int | None,
                    available: int | None) -> None:
    ev = {"workers": nw, "prefetch_factor": PREFETCH_FACTOR, "batch": batch, "imgsz": imgsz,
          "prefetch_gb": round(queued / GB, 2)}
    if shm is not None and shm < queued:
        res.findings.append(Finding(
            "MM102", "shm-too-small", "memory", Severity.error,
            f"/dev/shm has {shm / GB:.1f} GB free but {nw} workers x {PREFETCH_FACTOR} batches of {batch} at"
            f" {imgsz}px need about {queued / GB:.1f} GB there: workers will die with a bus error.",
            evidence={**ev, "shm_free_gb": round(shm / GB, 2)},
            fix=Fix(args={"workers": max(1, int(nw * shm / queued))},
                    note="or enlarge /dev/shm (docker run --shm-size=16g)"),
        ))
    if available and queued > PINNED_RAM_SHARE * available:
        res.findings.append(Finding(
            "MM104", "pinned-memory-large", "memory", Severity.warning,
            f"The prefetch queue ({nw * PREFETCH_FACTOR} batches, {queued / GB:.1f} GB) is pinned in RAM, more than"
            f" {int(PINNED_RAM_SHARE * 100)}% of the {available / GB:.1f} GB available.",
            evidence={**ev, "ram_available_gb": round(available / GB, 2)},
            fix=Fix(args={"workers": max(1, int(nw * PINNED_RAM_SHARE * available / queued))}),
        ))


def _cache_findings(res: ProbeResult, args: dict[str, Any], facts: dict[str, Any], imgsz: int, nw: int,
                    shm: int | None, available: int | None) -> None:
    f = res.facts
    size = facts.get("dataset.image_size_median")
    n = facts.get("dataset.images.train")
    if not size or not n:
        return
    need = cache_bytes_per_image(int(size[0]), int(size[1]), imgsz) * n
    f["cache.ram_bytes"] = need
    f["cache.ram_required"] = int(need * (1 + CACHE_SAFETY_MARGIN))
    f["cache.ram_fits"] = bool(available and f["cache.ram_required"] <= available)
    cache = args.get("cache", False)
    if cache not in (True, "ram"):
        return
    if not f["cache.ram_fits"]:
        res.findings.append(Finding(
            "MM101", "cache-ram-short", "memory", Severity.warning,
            f"cache='ram' needs about {f['cache.ram_required'] / GB:.1f} GB (Ultralytics asks for twice the"
            f" {need / GB:.1f} GB of resized images) but {(available or 0) / GB:.1f} GB is available: Ultralytics"
            " will silently train without a cache.",
            evidence={"images": n, "image_size": size, "imgsz": imgsz, "required_gb": round(f["cache.ram_required"] / GB, 2),
                      "available_gb": round((available or 0) / GB, 2)},
            fix=Fix(args={"cache": False}, note="or a smaller imgsz, or cache='disk'"),
        ))
    elif nw > 0 and shm is not None and shm < 2 * need:
        res.findings.append(Finding(
            "MM103", "cache-copied-per-worker", "memory", Severity.warning,
            f"/dev/shm has {shm / GB:.1f} GB free, less than twice the {need / GB:.1f} GB RAM cache: Ultralytics"
            f" copies the cache into each of the {nw} workers ({nw * need / GB:.1f} GB in all).",
            evidence={"shm_free_gb": round(shm / GB, 2), "cache_gb": round(need / GB, 2), "workers": nw},
            fix=Fix(note="enlarge /dev/shm (docker run --shm-size) to at least twice the cache"),
        ))

