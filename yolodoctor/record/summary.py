"""Summarise a run's step events: steady-state images/s over a window that says whether it can be trusted."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

from yolodoctor.record import bounds, stretches
from yolodoctor.record.settings import Settings


def steps_of(events: Iterable[dict]) -> list[dict]:
    return [e for e in events if e.get("type") == "step"]


def summarise(events: list[dict], settings: Settings | None = None) -> dict[str, Any]:
    """The summary of the longest train() call of the run (a program may train several times), with the others
    under ``per_train``."""
    trains = sorted({e.get("train_index", 0) for e in steps_of(events)})
    if len(trains) <= 1:
        t = trains[0] if trains else 0
        return summarise_train(steps_of(events), settings or settings_of(events, t), began=_began(events, t)) \
            | _recorder_cost(events, t)
    per = [summarise_train([s for s in steps_of(events) if s.get("train_index", 0) == t], settings_of(events, t),
                           began=_began(events, t)) | _recorder_cost(events, t) | {"train_index": t} for t in trains]
    main = max(per, key=lambda d: d["steps"])
    return {**main, "per_train": per}


def _began(events: list[dict], train_index: int) -> float | None:
    return next((e["t"] for e in events if e.get("type") == "train_begin" and e.get("train_index", 0) == train_index
                 and isinstance(e.get("t"), (int, float))), None)


def _recorder_cost(events: list[dict], train_index: int) -> dict[str, Any]:
    """The recorder's own time per step in the training thread (it times its step callbacks, trace excluded)."""
    end = next((e for e in events if e.get("type") == "train_end" and e.get("train_index", 0) == train_index
                and isinstance(e.get("recorder_s"), (int, float)) and e.get("steps")), None)
    return {"recorder_us_per_step": 1e6 * end["recorder_s"] / end["steps"]} if end else {}


def settings_of(events: list[dict], train_index: int = 0) -> Settings:
    """The settings event of one train() call, typed."""
    from yolodoctor.record.settings import as_settings

    return as_settings(next((e.get("settings") for e in events
                             if e.get("type") == "settings" and e.get("train_index", 0) == train_index), None))


def depth_of(settings: Settings) -> int:
    return bounds.prefetch_depth(settings.get("workers") or 0,
                                 settings.get("prefetch_factor") or bounds.PREFETCH_FACTOR)


def summarise_train(steps: list[dict], settings: Settings, whole: bool = False,
                    began: float | None = None) -> dict[str, Any]:
    """One train() call's steps summarised: ``seconds`` from its first step's wait to its last step's end,
    ``training_s`` the same with the pauses between stretches left out (record/stretches.py), ``pauses`` (count,
    seconds, longest, how many at an epoch's end), the steady ``window`` (record/bounds.py) and the figures over
    its training steps only. ``whole``: the steps given are the window (a rolling window of a live run), not a run
    from its start.
    ``began``: when this train() call began (its ``train_begin`` event); with it, ``one_off_s`` is the time the run
    took to reach its steady window beyond what its images before the window take at the steady rate (setup, filling
    a RAM cache, compiling, the first slow steps): what a change costs once, whatever the run's length."""
    out: dict[str, Any] = {"steps": len(steps), "images": sum(s.get("images") or 0 for s in steps)}
    if not steps:
        return out
    out["seconds"] = steps[-1]["t1"] - (steps[0]["t0"] - (steps[0].get("wait") or 0))
    parts = stretches.split(steps)  # traced steps are training steps too (only the window leaves them out)
    out["training_s"] = stretches.seconds(parts)
    gaps = stretches.pauses(parts)
    at_ends = [p["seconds"] for p in gaps if p["epoch_end"]]
    out["pauses"] = {"count": len(gaps), "seconds": sum(p["seconds"] for p in gaps),
                     "longest_s": max((p["seconds"] for p in gaps), default=0.0), "epoch_ends": len(at_ends),
                     "epoch_end_s_median": statistics.median(at_ends) if at_ends else None}
    w = bounds.window(steps, depth_of(settings), whole=whole, accumulate=settings.get("accumulate"),
                      warmup=settings.get("warmup_iterations"))
    window = w.pop("records")
    out["window"] = w
    spans = w.get("spans") or []
    if len(window) < 2:
        window = steps[len(steps) // 2:] or steps  # report something, marked invalid above
        spans = [list(stretches.span(p)) for p in stretches.split(window)]
    span = sum(b - a for a, b in spans)  # the window's training steps only: no pause between stretches
    imgs = sum(s["images"] for s in window)
    step_times = [(s.get("wait") or 0) + s["compute"] for s in window]
    rates = [s["images"] / t for s, t in zip(window, step_times, strict=False) if t > 0]
    waits = sum(s.get("wait") or 0 for s in window)
    comp = sum(s["compute"] for s in window)
    out.update({
        "images_per_s": imgs / span if span > 0 else None,
        "step_s_median": statistics.median(step_times),
        "step_s_p10": _pct(step_times, 0.1), "step_s_p90": _pct(step_times, 0.9),
        "images_per_s_p10": _pct(rates, 0.1), "images_per_s_p90": _pct(rates, 0.9),
        "data_wait_share": waits / (waits + comp) if waits + comp > 0 else None,
        "compute_s_median": statistics.median(s["compute"] for s in window),
        "wait_s_median": statistics.median((s.get("wait") or 0) for s in window),
        "gpu_ms_median": _median(s.get("gpu_ms") for s in window),
        "loss_finite": all(s.get("loss") is None or isinstance(s.get("loss"), (int, float)) for s in steps),
    })
    if began is not None and out["images_per_s"] and out["window"]["valid"] and not whole:
        before = sum(s.get("images") or 0 for s in steps if s.get("n", s["step"]) < out["window"]["first_step"])
        reached = window[0]["t0"] - (window[0].get("wait") or 0)
        out["one_off_s"] = max(0.0, reached - began - before / out["images_per_s"])
    return out


def _median(values: Iterable[Any]) -> float | None:
    vals = [v for v in values if isinstance(v, (int, float))]
    return statistics.median(vals) if vals else None


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))]
