"""Loader capacity: how many images/s the run's own train loader delivers with no model consuming them.

After the profiled steps, the child builds the same train loader again (``trainer.get_dataloader``: same dataset,
augmentation, batch, workers, pinning, mosaic state) and iterates it for a bounded time. Nothing waits on a model,
so the queue never fills: after the first burst (each worker's first batch arrives at about the same time) the
arrival rate is the pipeline's sustained production rate, the ceiling the GPU side can be fed at.
"""

from __future__ import annotations

import itertools
import statistics
import time
from copy import copy
from typing import Any

DEFAULT_SECONDS = 8.0


def measure(trainer: Any, *, seconds: float = DEFAULT_SECONDS, max_batches: int | None = None,
            mosaic: bool | None = None) -> dict[str, Any]:
    loader = trainer.get_dataloader(trainer.data["train"], batch_size=trainer.batch_size, rank=-1, mode="train")
    ds = loader.dataset
    if mosaic is False and hasattr(ds, "close_mosaic"):
        ds.close_mosaic(hyp=copy(trainer.args))
    workers = getattr(loader, "num_workers", 0)
    skip = max(workers, 1)
    t_start = time.monotonic()
    stamps: list[tuple[float, int]] = []
    try:
        it = iter(loader)
        while True:
            try:
                batch = next(it)
            except StopIteration:  # InfiniteDataLoader yields one epoch per iter(); the workers persist
                it = iter(loader)
                continue
            now = time.monotonic()
            stamps.append((now, int(batch["img"].shape[0])))
            if len(stamps) > skip and now - stamps[skip - 1][0] >= seconds:
                break
            if max_batches and len(stamps) >= max_batches:
                break
            if now - t_start > seconds * 4 + 60:  # a loader that barely moves: give up, say so
                break
    finally:
        if hasattr(loader, "close"):
            loader.close()
    out: dict[str, Any] = {"workers": workers, "batch": trainer.batch_size, "batches": len(stamps),
                           "first_batch_s": stamps[0][0] - t_start if stamps else None,
                           "mosaic": mosaic, "skipped_batches": min(skip, len(stamps))}
    window = stamps[skip - 1:] if len(stamps) > skip else []
    if len(window) >= 2:
        span = window[-1][0] - window[0][0]
        imgs = sum(n for _, n in window[1:])
        gaps = [b[0] - a[0] for a, b in itertools.pairwise(window)]
        out.update({"images_per_s": imgs / span if span > 0 else None, "seconds": span,
                    "batch_interval_s_median": statistics.median(gaps), "valid": span >= seconds * 0.5})
    else:
        out.update({"images_per_s": None, "seconds": None, "valid": False})
    return out
