"""Memory and dataloader probe: cores really available, Ultralytics' worker clamp, RAM for cache='ram',
/dev/shm and pinned memory for the prefetch queue.

It measures and predicts (cpu.*, ram.*, shm.*, loader.*, cache.*); the DL10x and MM10x rules in rules/ judge the
numbers (workers above the usable cores, a prefetch queue /dev/shm cannot hold, a RAM cache that does not fit).

The estimates follow the task (the dataset probe's dataset.task). Detection's cache='ram' holds each train image
resized to imgsz, behind Ultralytics' RAM guard (check_cache_ram, ultralytics/data/base.py), which wants twice that
free: cache.ram_bytes, cache.ram_required, cache.ram_fits. Classification's ClassificationDataset
(ultralytics/data/dataset.py) caches every train and val image decoded at full resolution (no resize) and has no
guard: cache.ram_bytes is the sum of height x width x 3 over those images (dataset.cls.decoded_bytes_*),
cache.ram_peak what it holds while packing them (cache_images decodes a split into a list, then copies it into one
buffer), cache.ram_fits whether that peak is available; there is no cache.ram_required, as nothing would refuse
the cache. Its batches are float32 (ToTensor), four bytes a value.
"""

from __future__ import annotations

import math
import os
from typing import Any

from yolodoctor.api import system
from yolodoctor.check.probe import ProbeResult

PREFETCH_FACTOR = 4  # Ultralytics' train loader (data/build.py)
CACHE_SAFETY_MARGIN = 1.0  # Ultralytics' check_cache_ram default: require twice the estimate


def cache_bytes_per_image(width: int, height: int, imgsz: int) -> int:
    """Bytes one image takes in cache='ram': Ultralytics' load_image resizes the long side to imgsz (uint8 BGR)."""
    r = imgsz / max(width, height)
    w, h = min(math.ceil(width * r), imgsz), min(math.ceil(height * r), imgsz)
    return w * h * 3


def batch_bytes(batch: int, imgsz: int, task: str | None = None) -> int:
    """A collated train batch: batch x 3 x imgsz x imgsz uint8 (mosaic and letterbox output is imgsz square); a
    classification batch is float32 (classify_augmentations end in ToTensor), 4 bytes a value."""
    return batch * 3 * imgsz * imgsz * (4 if task == "classify" else 1)


def cls_cache_bytes(train: int, val: int) -> tuple[int, int]:
    """(held, peak) bytes of classification's cache='ram' for the decoded sizes of its train and val images:
    ClassificationDataset.cache_images decodes a split into a list of arrays, then copies them into one buffer
    (BaseDataset._ImageCache), so a split takes twice its size while it is packed; train is built first."""
    return train + val, max(2 * train, train + 2 * val)


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
                    shm_free: int | str | None = "probe") -> ProbeResult:
    """``facts`` are those already gathered (environment, dataset). Keyword arguments let tests fake the machine."""
    res = ProbeResult(given=dict(facts))
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
    task = facts.get("dataset.task")
    n_train = facts.get("dataset.images.train")
    nw = effective_workers(workers, cpu_count=cpu_count, cuda_devices=len(facts.get("env.torch_devices") or []),
                           device_kind=device_kind, images=n_train, batch=batch)
    f["loader.workers_requested"] = workers
    f["loader.workers_effective"] = nw
    f["loader.batch"] = batch
    f["loader.imgsz"] = imgsz
    if batch and nw > 0:
        f["loader.prefetch_factor"] = PREFETCH_FACTOR
        f["loader.prefetch_batches"] = nw * PREFETCH_FACTOR
        f["loader.prefetch_bytes"] = nw * PREFETCH_FACTOR * batch_bytes(batch, imgsz, task)
    f["args.cache"] = args.get("cache", False)
    size = facts.get("dataset.image_size_median")
    n = facts.get("dataset.images.train")
    if task == "classify":
        train = facts.get("dataset.cls.decoded_bytes_train")
        if train:
            held, peak = cls_cache_bytes(int(train), int(facts.get("dataset.cls.decoded_bytes_val") or 0))
            f["cache.ram_bytes"] = held
            f["cache.ram_peak"] = peak
            f["cache.ram_fits"] = bool(mem["available"] and peak <= mem["available"])
    elif size and n:
        need = cache_bytes_per_image(int(size[0]), int(size[1]), imgsz) * n
        f["cache.ram_bytes"] = need
        f["cache.ram_required"] = int(need * (1 + CACHE_SAFETY_MARGIN))
        f["cache.ram_fits"] = bool(mem["available"] and f["cache.ram_required"] <= mem["available"])
    return res
