"""The ranks of a DDP training side by side: each rank's steps (its own event stream) and its processes (the
sampler's per-rank rows), summarised per rank for ``profile.json``'s ``ranks``.

Under DDP every rank is its own process with its own stream: ``events.jsonl`` for rank 0, ``events-rank{R}.jsonl``
for the others (profiling/session.py). A rank's step time is the same for all ranks (each waits for the others at
every gradient all-reduce); where its time goes is not: the rank that holds the others up spends longer waiting for
its own data (or computing), the others spend it inside the all-reduce, which the step's compute time includes.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Any

from yolodoctor.record import stretches
from yolodoctor.record.events import read_events
from yolodoctor.record.profile import EVENTS
from yolodoctor.record.settings import Settings
from yolodoctor.record.summary import settings_of, steps_of, summarise_train

RANK_STREAM = re.compile(r"^events-rank(\d+)\.jsonl(?:\.gz)?$")


def streams(run: str | Path) -> dict[int, Path]:
    """Each rank's event stream, by rank; empty for a single process (no ``events-rank{R}.jsonl`` beside
    ``events.jsonl``)."""
    run = Path(run)
    found: dict[int, Path] = {}
    try:
        names = [p.name for p in run.iterdir()]
    except OSError:
        return {}
    for name in names:
        m = RANK_STREAM.match(name)
        if m:
            found[int(m.group(1))] = run / name.removesuffix(".gz")
    if not found:
        return {}
    return {0: run / EVENTS, **dict(sorted(found.items()))}


def fold(summary: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """Make rank 0's ``summary`` the whole training's: ``world_size``, and images and images/s summed over the ranks
    (the p10/p90 rates scaled alike: the ranks move in step) where every rank has a rate; rank 0's own figures stay
    in its row. Nothing is summed where a rank has none, so the summary never mixes rank 0's figures with totals."""
    summary["world_size"] = len(rows)
    rates = [r for r in (row.get("images_per_s") for row in rows) if isinstance(r, (int, float)) and r > 0]
    r0 = summary.get("images_per_s")
    if not r0 or len(rates) != len(rows):
        return
    total = sum(rates)
    for key in ("images_per_s_p10", "images_per_s_p90"):
        if isinstance(summary.get(key), (int, float)):
            summary[key] = summary[key] * total / r0
    summary["images_per_s"] = total
    summary["images"] = sum(r.get("images") or 0 for r in rows)


def summarise(run: str | Path, samples: list[dict] | None = None, read: dict[int, list[dict]] | None = None,
              since: float | None = None) -> list[dict[str, Any]] | None:
    """One row per rank: its steady window's figures (from its own steps, judged like a single process's), the
    median CPU of its process and of its train loader workers over that window, and its own GPU (UUID, median
    utilisation, peak memory) where NVML listed the rank's process on one (from ``samples``, where the sampler saw
    the ranks). None for a single process. ``read``: the streams the caller has already read, by rank.
    ``since``: only the steps that ended after it, taken whole as the window (a live run's rolling window)."""
    paths = streams(run)
    if not paths:
        return None
    rows = []
    for rank, path in paths.items():
        events = read[rank] if read and rank in read else list(read_events(path))
        steps = steps_of(events)
        main = max({s.get("train_index", 0) for s in steps}, key=lambda t: sum(s.get("train_index", 0) == t
                                                                              for s in steps), default=0)
        steps = [s for s in steps if s.get("train_index", 0) == main]
        if since is not None:
            steps = [s for s in steps if isinstance(s.get("t1"), (int, float)) and s["t1"] >= since]
        settings = settings_of(events, main) or settings_of(events, -1)
        pid = next((e.get("pid") for e in events if e.get("type") == "run_start"), None)
        rows.append(row(rank, pid, steps, settings, samples or [], whole=since is not None))
    return rows


def row(rank: int, pid: int | None, steps: list[dict], settings: Settings, samples: list[dict],
        whole: bool = False) -> dict[str, Any]:
    """One rank's row from its steps (``whole``: they are the window, as in a live run's rolling window) and the
    sampler's records of its processes over that window."""
    s = summarise_train(steps, settings, whole=whole)
    out: dict[str, Any] = {"rank": rank, "pid": pid, "steps": s["steps"], "images": s["images"]}
    for key in ("images_per_s", "step_s_median", "compute_s_median", "wait_s_median", "data_wait_share"):
        out[key] = s.get(key)
    out["window_valid"] = (s.get("window") or {}).get("valid")
    spans = (s.get("window") or {}).get("spans") or None
    out.update(_processes(samples, rank, spans))
    return out


def _processes(samples: list[dict], rank: int, spans: list[list[float]] | None) -> dict[str, Any]:
    """The rank's process and workers over ``spans`` (its window's training steps; all samples where there are
    none)."""
    key = str(rank)
    rows = [s["ranks"][key] for s in samples
            if s.get("type") == "sample" and isinstance(s.get("ranks"), dict) and isinstance(s["ranks"].get(key), dict)
            and (not spans or stretches.inside(s.get("t", 0), spans))]
    if not rows:
        return {}

    def med(k: str) -> float | None:
        vals = [r[k] for r in rows if isinstance(r.get(k), (int, float))]
        return round(statistics.median(vals), 1) if vals else None

    out: dict[str, Any] = {"cpu_pct": med("cpu"), "workers": med("workers"), "workers_cpu_pct": med("workers_cpu")}
    gpus = [r["gpu"] for r in rows if isinstance(r.get("gpu"), dict)]
    if gpus:  # the rank's own GPU, where NVML listed the rank's process on one
        utils = [g["util"] for g in gpus if isinstance(g.get("util"), (int, float))]
        mems = [g["mem_used"] for g in gpus if isinstance(g.get("mem_used"), (int, float))]
        out.update(gpu_uuid=gpus[-1].get("uuid"), gpu_util_pct=round(statistics.median(utils), 1) if utils else None,
                   gpu_mem_used_max=max(mems) if mems else None)
    return out
