"""How many steps a bounded profile runs, and which of them form the steady-state window.

Ultralytics' train loader prefetches ``workers x 4`` batches and keeps that many in flight. While that queue drains,
the training is fed faster than the loader can produce, so a window inside the drain measures the queue, not the
pipeline. The window is therefore judged from what the run shows (``window``):

  - the queue's occupancy, recorded at every step (``ready``: batches waiting to be consumed): the window starts once
    the occupancy has reached the level it keeps to the end of the run (full: the GPU side is the limit; empty: the
    loader is), and is invalid while the occupancy still falls across it (the queue is still draining); the verdict
    then says how many more steps the drain needs;
  - the rate itself: the two halves of the window must agree within RATE_TOLERANCE;
  - at least MIN_WINDOW steps;
  - past Ultralytics' warm-up ramp of the gradient accumulation: over its first warm-up iterations the trainer
    raises the batches per optimizer step from 1 to ``nbs / batch`` (each step's record keeps ``accumulate``), and a
    step that also runs the optimizer (under fp16 the scaler's check for infinite gradients, which waits for the
    GPU; the clipping, the update, the EMA) costs more, so a small model's rate rises as the accumulation does.
    Where the run has at least MIN_WINDOW steps at the nominal accumulation, the window starts there (``warmup``
    says how many steps that leaves out); where it has not, the window keeps its ramp steps, ``warmup`` says so and
    ``warmup_needs`` counts the steps that would take the run past the ramp's end (``ramp_end``), which a bounded
    run moves its bound for where it can reach them.

Records without occupancy (older runs) fall back to the fixed rule: the window starts after SETTLE + one queue depth
and needs twice the depth. A bounded profile runs ``default_steps`` (enough for one queue depth to drain after SETTLE
and two minimal windows) and, where the evidence says the queue is still draining or the window too short, up to
``max_steps`` (profiling/recorder.py extends it); it is never cut short by the end of the user's epochs (the measured
epoch runs on past its last batch, wrapping around the dataset).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from yolodoctor.record import stretches

SETTLE = 20  # first steps: allocator growth, cuDNN/algorithm selection, lazy init
MIN_STEPS = 30
MIN_WINDOW = 10
PREFETCH_FACTOR = 4
RATE_TOLERANCE = 0.3  # the window's halves may differ this much in images/s (step times are noisy on a shared CPU)
ACTIVE = 5  # the trace window's steps, at the end of a bounded profile (profiling/trace.py)
MAX_FACTOR = 4  # a bounded profile extended for a draining queue runs at most this many times its default steps
DRAIN_SHARE = 0.05  # a window whose queue supplies more than this share of its batches measures partly the queue


def prefetch_depth(workers: int, prefetch_factor: int | None = PREFETCH_FACTOR) -> int:
    return workers * (prefetch_factor or 0) if workers > 0 else 0


def default_steps(workers: int, prefetch_factor: int | None = PREFETCH_FACTOR) -> int:
    """MIN_STEPS without a loader queue, else SETTLE + one queue depth + two minimal windows; plus the trace window's
    steps."""
    depth = prefetch_depth(workers, prefetch_factor)
    return (max(MIN_STEPS, SETTLE + depth + 2 * MIN_WINDOW) if depth else MIN_STEPS) + ACTIVE


def max_steps(workers: int, prefetch_factor: int | None = PREFETCH_FACTOR) -> int:
    """The most a bounded run extends to: MAX_FACTOR x its default, which covers the fixed rule's SETTLE + 3 queue
    depths for a loader whose occupancy cannot be read."""
    return MAX_FACTOR * default_steps(workers, prefetch_factor)


def window_start(workers: int, prefetch_factor: int | None = PREFETCH_FACTOR) -> int:
    """The fixed rule's first window step, for records without occupancy evidence."""
    return SETTLE + prefetch_depth(workers, prefetch_factor)


def ramp_end(accumulate: int | float | None, warmup: int | float | None) -> int:
    """The first iteration at which Ultralytics' warm-up has raised the gradient accumulation to ``accumulate`` (its
    nominal nbs / batch) over ``warmup`` iterations (its ``np.interp(ni, [0, nw], [1, accumulate]).round()``, rounded
    half to even as numpy does); 0 where nothing ramps."""
    if not accumulate or accumulate <= 1 or not warmup or warmup <= 0:
        return 0
    slope = (accumulate - 1) / warmup
    return next((ni for ni in range(int(warmup) + 1) if round(slope * ni + 1) >= accumulate), int(warmup))


def _ramp(plain: list[dict[str, Any]], accumulate: int | float | None) -> int | None:
    """The first step after the last one recorded below the nominal ``accumulate``; None where none is."""
    if not accumulate or accumulate <= 1:
        return None
    below = [_n(s) for s in plain if isinstance(s.get("accumulate"), (int, float)) and s["accumulate"] < accumulate]
    return max(below) + 1 if below else None


def _past_ramp(out: dict[str, Any], plain: list[dict[str, Any]], start: int, accumulate: int | float | None,
               warmup: int | float | None) -> tuple[int, int | None]:
    """The window's first step once the warm-up's ramp of the gradient accumulation is left out where the run has
    MIN_WINDOW steps past it, and the more steps that would take a run still in it past its end (None where none are
    known); sets ``out``'s ``warmup`` and ``in_warmup`` (window's docstring)."""
    out.update(warmup=None, in_warmup=False)
    ramp = _ramp(plain, accumulate)
    if ramp is None:
        return start, None
    if sum(1 for s in plain if _n(s) >= max(start, ramp)) >= MIN_WINDOW:
        if ramp > start:
            out["warmup"] = (f"steps {start} to {ramp - 1} left out: Ultralytics' warm-up was still raising the "
                             f"batches per optimizer step to {accumulate:g}, and a step that also runs the optimizer "
                             "costs more")
        return max(start, ramp), None
    end = max(ramp_end(accumulate, warmup), ramp) if warmup else None
    last = max(_n(s) for s in plain)
    out["in_warmup"] = True
    out["warmup"] = (f"the window lies in Ultralytics' warm-up: the optimizer stepped more often than every "
                     f"{accumulate:g} batches, as it does after" + (f" step {end}" if end is not None else " it")
                     + "; the rate after the warm-up may be higher")
    return start, (end - last + 2 * MIN_WINDOW if end is not None and end > last - MIN_WINDOW else None)


def _n(s: dict[str, Any]) -> int:
    return s.get("n", s.get("step", 0))


def _slope(xs: list[float], ys: list[float]) -> float:
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=False)) / den if den else 0.0


def _rate(steps: list[dict[str, Any]]) -> float | None:
    t = sum((s.get("wait") or 0) + s["compute"] for s in steps)
    return sum(s.get("images") or 0 for s in steps) / t if t > 0 else None


def window(steps: list[dict[str, Any]], depth: int, *, whole: bool = False, accumulate: int | float | None = None,
           warmup: int | float | None = None) -> dict[str, Any]:
    """The steady window of a run's steps (trace steps left out): ``first_step``, ``last_step``, ``steps`` (the
    records), ``stretches`` ([first, last] of each stretch of consecutive training steps it holds), ``spans`` (their
    [start, end] on the run's clock), ``valid``, ``why`` (None when valid), ``needs`` (more steps the run would need,
    when the evidence can tell), ``evidence`` ("occupancy" | "no queue" | "fixed rule"), ``refill_skipped`` (steps
    left out after pauses), ``warmup`` (None, or what the warm-up's ramp of the gradient accumulation did to the
    window), ``in_warmup`` (the window holds the ramp's steps) and ``warmup_needs`` (the more steps that would take
    the window past that ramp, where known). ``whole``: the steps given are a live run's rolling window, judged from
    their first settled step on.
    ``accumulate``, ``warmup``: the run's nominal gradient accumulation and warm-up iterations (its settings), which
    place the ramp (the module's docstring).

    A window holds training steps only: the steps are cut at their pauses (record/stretches.py), and after each pause
    the steps served from the loader's queue, which refilled while the training paused, are left out (``refill``).
    Where the stretches' rates differ (mosaic closing, say), the window is the longest run of final stretches that
    agree, named in ``phase``."""
    plain = [s for s in steps if not s.get("traced")]
    out: dict[str, Any] = {"prefetch_depth": depth, "needs": None, "why": None}
    first = max(_n(steps[0]) if steps and whole else 0, SETTLE)  # a live window: its own steps, settled ones only
    parts = [p for p in ([s for s in part if not s.get("traced")] for part in stretches.split(steps)) if p]
    if depth == 0:
        evidence = "no queue"
    elif plain and all(isinstance(s.get("ready"), (int, float)) for s in plain if _n(s) >= first) and \
            any(_n(s) >= first for s in plain):
        evidence = "occupancy"
    else:
        evidence = "fixed rule"
    head = parts[0] if parts else []
    if evidence == "occupancy" and not whole:
        start = _settled_start(head, depth) if any(_n(s) >= SETTLE for s in head) else first
    elif evidence == "fixed rule" and not whole:
        start = SETTLE + depth
    else:
        start = first
    level = steady_level(head, depth) if evidence == "occupancy" and not whole else None
    start, ramp_needs = _past_ramp(out, [] if whole else plain, start, accumulate, warmup)
    kept, skipped = [], 0
    for k, part in enumerate(parts):
        cut = 0 if k == 0 else refill(part, depth, evidence, level)
        skipped += min(cut, len(part))
        rest = [s for s in part[cut:] if _n(s) >= start]
        if rest:
            kept.append(rest)
    out.update(first_step=start, evidence=evidence, refill_skipped=skipped, pauses=len(parts) - 1)
    why, needs = None, None
    win = [s for p in kept for s in p]
    if evidence == "occupancy" and len(kept) > 1:  # a later stretch still draining its refill measures the queue
        kept = kept[:1] + [p for p in kept[1:] if len(p) < MIN_WINDOW or _draining(p, depth) is None]
        win = [s for p in kept for s in p]
    if evidence == "fixed rule" and len(parts) <= 1 and len(win) < max(2 * depth, MIN_WINDOW):
        need = max(2 * depth, MIN_WINDOW)
        why = (f"only {len(win)} steps after the first {start}; without a record of the queue's occupancy a window "
               f"needs {need} (twice the loader's prefetch depth of {depth} batches)")
        needs = need - len(win)
    elif len(win) < MIN_WINDOW and len(parts) > 1:
        sizes = ", ".join(str(len(p)) for p in parts[:6]) + (", ..." if len(parts) > 6 else "")
        after = (f"by the steps served from the loader's queue (up to {depth} batches) that refilled during it"
                 if depth else "by its first step (the switch back from validation)")
        why = (f"only {len(win)} steady steps: the run's {len(parts)} stretches between pauses ({sizes} steps) are "
               f"used up by its first {start} steps and, after each pause, {after}; no steady stretch is left")
    elif len(win) < MIN_WINDOW:
        why, needs = f"only {len(win)} steady steps after the first {start}; a window needs {MIN_WINDOW}", \
            MIN_WINDOW - len(win)
    elif evidence == "occupancy" and (drain := _draining(kept[0], depth)) is not None:
        left, per_step = drain
        needs = math.ceil(left / per_step) + MIN_WINDOW
        why = (f"the loader's queue was still draining across the window ({left:.0f} of {depth} prefetched batches "
               f"left at its end, {per_step:.2f} fewer per step): the rate measured is partly the queue's; about "
               f"{needs} more steps would reach the loader's own rate")
    elif (moved := _moved(win)) is not None:
        r1, r2 = moved
        tail = _agreeing_tail(kept)
        if tail is not None:
            out["phase"] = (f"the last {len(tail)} of {len(kept)} stretches: the rate moved {r2 / r1 - 1:+.0%} "
                            "across the run's stretches, and the last ones agree")
            kept = tail
            win = [s for p in kept for s in p]
        else:
            why = (f"the rate moved {r2 / r1 - 1:+.0%} between the window's halves ({r1:.1f} then {r2:.1f} "
                   "images/s): the pipeline had not settled")
            needs = len(win)
    out.update(records=win, steps=len(win), valid=why is None, why=why, needs=needs,
               stretches=[[_n(p[0]), _n(p[-1])] for p in kept],
               spans=[[round(a, 6), round(b, 6)] for a, b in (stretches.span(p) for p in kept)])
    out["warmup_needs"] = ramp_needs  # a bounded run still in the ramp: the steps that would take it past it
    if win:
        out.update(first_step=_n(win[0]), last_step=_n(win[-1]))
    return out


def _moved(win: list[dict[str, Any]]) -> tuple[float, float] | None:
    """The halves' rates where they differ by more than RATE_TOLERANCE."""
    half = len(win) // 2
    r1, r2 = _rate(win[:half]), _rate(win[half:])
    return (r1, r2) if r1 and r2 and abs(r2 / r1 - 1) > RATE_TOLERANCE else None


def _agreeing_tail(kept: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]] | None:
    """The longest run of final stretches (more than one stretch left out, at least MIN_WINDOW steps) whose halves
    agree: the phase the training ends in (mosaic closed, the warm-up over)."""
    for i in range(1, len(kept)):
        tail = kept[i:]
        steps = [s for p in tail for s in p]
        if len(steps) >= MIN_WINDOW and _moved(steps) is None:
            return tail
    return None


def refill(part: list[dict[str, Any]], depth: int, evidence: str, level: float | None = None) -> int:
    """Steps at the start of a stretch after a pause that the loader's queue served from batches made during the
    pause: with the queue's occupancy recorded, the batch the first step took and those still ready behind it (the
    queue is first in, first out) - unless the pause left the queue no fuller than ``level``, the level the run's
    first stretch settled at, and the stretch keeps it there past those batches (a queue that stays full means the GPU
    side sets the pace: a step served from it is a steady one, and only the first step, the switch back, is left
    out; a queue that drains after them is a loader that cannot keep up). A stretch that ends before its refill
    would (an epoch of fewer batches than the queue holds) is judged by its own steps after the first: a loader
    slower than the GPU side drains the queue across them. Without occupancy, the whole prefetch depth (it may have
    filled); without a queue, the first step alone (the switch back from validation)."""
    if evidence == "no queue" or depth == 0:
        return 1
    r0 = part[0].get("ready")
    if evidence == "occupancy" and isinstance(r0, (int, float)):
        served = min(int(r0) + 1, depth)
        tol = max(1.0, 0.1 * depth)
        def readings(steps: list[dict[str, Any]]) -> list[float]:
            return [s["ready"] for s in steps if isinstance(s.get("ready"), (int, float))]

        # a stretch no longer than its refill (epochs shorter than the queue): its own steps after the first show it
        later = readings(part[served:]) or readings(part[1:])
        if level is not None and r0 <= level + tol and later and min(later) >= level - tol:
            return 1  # the queue left as the run keeps it, and kept so past the refill: the GPU side sets the pace
        return served
    return depth


def steady_level(head: list[dict[str, Any]], depth: int) -> float | None:
    """The queue occupancy the run's first stretch keeps over its last quarter (after SETTLE), where recorded."""
    after = [s for s in head if _n(s) >= SETTLE and isinstance(s.get("ready"), (int, float))]
    if len(after) < MIN_WINDOW:
        return None
    return float(statistics.median(s["ready"] for s in after[-max(3, len(after) // 4):]))


def _settled_start(steps: list[dict[str, Any]], depth: int) -> int:
    """The first step after SETTLE at which the queue's occupancy is within tolerance of the level it keeps over the
    last quarter of the run."""
    after = [s for s in steps if _n(s) >= SETTLE]
    tail = after[-max(3, len(after) // 4):]
    level = statistics.median(s["ready"] for s in tail)
    tol = max(1.0, 0.1 * depth)
    return next((_n(s) for s in after if s["ready"] <= level + tol), _n(after[-1]))


def _tolerance(depth: int) -> float:
    return max(2.0, 0.15 * depth)


def _draining(win: list[dict[str, Any]], depth: int) -> tuple[float, float] | None:
    """(batches left at the window's end, fewer per step) where the occupancy still falls across the window and is
    not yet near empty: by more than the tolerance in all, or by more than DRAIN_SHARE of a batch a step (the rate
    measured would then be that much the queue's) and more than the occupancy's integer jitter; None otherwise."""
    xs, ys = [float(_n(s)) for s in win], [float(s["ready"]) for s in win]
    slope = _slope(xs, ys)
    tol = _tolerance(depth)
    end = statistics.fmean(ys) + slope * (xs[-1] - statistics.fmean(xs))
    drop = -slope * (xs[-1] - xs[0])
    if slope < 0 and end > tol and (drop > tol or (-slope > DRAIN_SHARE and drop > 2.0)):
        return end, -slope
    return None
