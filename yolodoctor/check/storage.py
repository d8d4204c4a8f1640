"""Storage probe: where the images live, how fast they read cold, and how long one core takes to decode them.

The read is measured cold: each sampled file is flushed (fdatasync) and dropped from the page cache with
posix_fadvise(DONTNEED), which needs no root; the fact ``io.cache_state`` says whether that worked. Decode is
OpenCV's imread plus the resize to imgsz, as Ultralytics' load_image does, timed on the same sample (warm).

The facts (io.*) include the images/s the loader's processes could read and decode at these speeds; the IO10x rules
in rules/ judge them (a network file system, a read or decode ceiling below what a GPU trains at).
"""

from __future__ import annotations

import os
import random
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from yolodoctor.api import system
from yolodoctor.check.probe import ProbeResult

SAMPLE = 48


def drop_cache(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return True
    except (OSError, AttributeError):
        return False
    finally:
        os.close(fd)


def timed_read(path: Path) -> tuple[int, float] | None:
    """(bytes, seconds) of reading the file whole, or None where it cannot be read (the dataset scan reports it)."""
    t = time.perf_counter()
    try:
        with open(path, "rb", buffering=0) as fh:
            n = len(fh.read())
    except OSError:
        return None
    return n, time.perf_counter() - t


def timed_decode(path: Path, imgsz: int) -> tuple[float, float] | None:
    """(decode seconds, resize seconds) as Ultralytics' load_image does it, or None if OpenCV cannot decode."""
    import cv2

    t0 = time.perf_counter()
    im = cv2.imread(str(path), cv2.IMREAD_COLOR)
    t1 = time.perf_counter()
    if im is None:
        return None
    h, w = im.shape[:2]
    r = imgsz / max(h, w)
    if r != 1:
        interp = cv2.INTER_LINEAR if r > 1 else cv2.INTER_AREA
        cv2.resize(im, (min(round(w * r), imgsz), min(round(h * r), imgsz)), interpolation=interp)
    return t1 - t0, time.perf_counter() - t1


def sample_paths(paths: Sequence[Path], n: int = SAMPLE, seed: int = 0) -> list[Path]:
    paths = list(paths)
    if len(paths) <= n:
        return paths
    return random.Random(seed).sample(paths, n)


def probe_storage(images: Sequence[Path], args: dict[str, Any], facts: dict[str, Any], *, cold: bool = True,
                  sample: int = SAMPLE, partitions: list | None = None) -> ProbeResult:
    res = ProbeResult(given=dict(facts))
    f = res.facts
    if not images:
        return res
    root = Path(facts.get("dataset.root") or Path(images[0]).parent)
    mount = system.mount_of(root, partitions)
    f["io.mount"] = mount
    f["io.network_fs"] = system.is_network_fs(mount["fstype"] if mount else None)
    f["io.path"] = str(root)
    if mount:
        f["io.fstype"], f["io.mountpoint"] = mount["fstype"], mount["mountpoint"]

    picked = sample_paths(images, sample)
    dropped = [drop_cache(p) for p in picked] if cold else [False] * len(picked)
    f["io.cache_state"] = "cold" if cold and all(dropped) else ("partly-cold" if any(dropped) else "warm")
    readable = [(p, r) for p in picked if (r := timed_read(p)) is not None]
    if not readable:
        return res
    picked, reads = [p for p, _ in readable], [r for _, r in readable]
    nbytes = sum(n for n, _ in reads)
    secs = sum(s for _, s in reads)
    f["io.sample_files"] = len(picked)
    f["io.read_mb_s"] = round(nbytes / secs / 1e6, 1) if secs > 0 else None
    f["io.read_ms_per_image"] = round(1000 * secs / len(picked), 3)

    imgsz = args.get("imgsz") or 640
    imgsz = max(imgsz) if isinstance(imgsz, (list, tuple)) else int(imgsz)
    timings = [t for t in (timed_decode(p, imgsz) for p in picked) if t is not None]
    if not timings:
        return res
    decode = [1000 * d for d, _ in timings]
    resize = [1000 * r for _, r in timings]
    f["io.decode_ms_median"] = round(statistics.median(decode), 3)
    f["io.decode_ms_p90"] = round(sorted(decode)[int(0.9 * (len(decode) - 1))], 3)
    f["io.resize_ms_median"] = round(statistics.median(resize), 3)
    per_image_ms = f["io.read_ms_per_image"] + f["io.decode_ms_median"] + f["io.resize_ms_median"]
    f["io.images_per_s_per_core"] = round(1000 / per_image_ms, 1)
    # the loader's ceilings at these speeds: what its processes (at least one) could read, and decode, per second
    nw = max(facts.get("loader.workers_effective") or 0, 1)
    f["io.workers"] = nw
    read_ms, decode_ms = f["io.read_ms_per_image"], f["io.decode_ms_median"] + f["io.resize_ms_median"]
    f["io.read_ceiling_images_per_s"] = round(1000 / read_ms * nw, 1) if read_ms > 0 else float("inf")
    f["io.decode_ceiling_images_per_s"] = round(1000 / decode_ms * nw, 1) if decode_ms > 0 else float("inf")
    return res
