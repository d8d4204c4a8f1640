"""What the facts of runs must never contradict: related facts cover the same span, shares are shares, per-step
counts are per training step. A violation is a bug in how a fact was computed (or a damaged record), not a finding:
the tests check these on every recorded profile and on generated records."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Iterable
from typing import Any

from yolodoctor.numbers import is_number as _num

SHARES = ("run.data_wait_share", "run.val_share", "trace.gpu_busy_share", "trace.short_kernel_share",
          "trace.tensor_core_share")
PER_STEP = ("trace.kernels_per_step", "trace.syncs_per_step")
SPREAD = 2.0  # per-step counts of one model at other batch sizes stay within this factor of each other


def violations(facts: dict[str, Any], events: Iterable[dict] | None = None) -> list[str]:
    """The invariants one run's facts (and, given, its event stream) break, each in one sentence."""
    out = []
    alloc, reserved, total = (facts.get(k) for k in ("gpu.torch_allocated_max", "gpu.torch_reserved_max",
                                                     "gpu.mem_total"))
    if _num(alloc) and _num(reserved) and alloc > reserved:
        out.append(f"gpu.torch_allocated_max {alloc:.0f} exceeds gpu.torch_reserved_max {reserved:.0f}")
    if _num(reserved) and _num(total) and total > 0 and reserved > total:
        out.append(f"gpu.torch_reserved_max {reserved:.0f} exceeds gpu.mem_total {total:.0f}")
    for k in SHARES:
        v = facts.get(k)
        if _num(v) and not 0.0 <= v <= 1.0:
            out.append(f"{k} {v} is not a share in [0, 1]")
    if events is not None:
        out += _trace_in_one_epoch([e for e in events if e.get("type") == "step"])
    return out


def _trace_in_one_epoch(steps: list[dict]) -> list[str]:
    """The traced steps are training steps of one epoch of one train() call, consecutive: per-step trace facts
    divide by them, so an epoch's end (validation, saving, a new loader iterator) inside the window would count as
    training."""
    traced = [s for s in steps if s.get("traced")]
    where = {(s.get("train_index", 0), s.get("epoch")) for s in traced}
    if len(where) > 1:
        return [f"the trace window spans {len(where)} epochs: {sorted(where, key=str)}"]
    ns = sorted(s.get("n", s.get("step", 0)) for s in traced)
    if ns and ns != list(range(ns[0], ns[0] + len(ns))):
        return [f"the trace window's steps are not consecutive: {ns}"]
    return []


def across(runs: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Per-step counts of runs of one model (``(model, facts)`` pairs) at any batch: each within SPREAD x the
    median of that model's runs."""
    out = []
    for key in PER_STEP:
        by: dict[str, list[float]] = {}
        for model, f in runs:
            if _num(f.get(key)):
                by.setdefault(model, []).append(f[key])
        for model, vals in by.items():
            mid = statistics.median(vals)
            out += [f"{key} {v:.0f} of a {model} run is more than {SPREAD:.0f}x from that model's median {mid:.0f}"
                    for v in vals if mid > 0 and not 1 / SPREAD <= v / mid <= SPREAD]
    return out


RATE_AGREEMENT = 0.10  # the window's images/s against its images over the sum of its step times


def window_violations(summary: dict[str, Any], events: Iterable[dict],
                      ranks: list[dict[str, Any]] | None = None) -> list[str]:
    """What a summary's steady window must never do with the steps of its train() call (``events``: the stream of
    rank 0 or of the single process; ``ranks``: a DDP training's rows):

    - hold a pause: consecutive window steps of one stretch are never further apart than the pause limit
      (max(0.5 s, 3 x the median step), record/stretches.py);
    - give a rate other than its steps': images/s equals the window's images over the sum of its step times within
      RATE_AGREEMENT (the ranks' rates summed under DDP);
    - hold a step served from the loader's queue as it stood when a pause ended (the batch the stretch's first step
      took and those ready behind it; the whole prefetch depth where the occupancy was not recorded), unless the
      pause left the queue no fuller than the level the run settled at (bounds.refill);
    - leave unsaid which steps it holds: a valid window states its first and last step and its stretches."""
    from yolodoctor.record import bounds, stretches

    w = summary.get("window") if isinstance(summary.get("window"), dict) else None
    if not w:
        return []
    out: list[str] = []
    main = summary.get("train_index", 0)
    every = [e for e in events if e.get("type") == "step" and e.get("train_index", 0) == main
             and _num(e.get("t0")) and _num(e.get("t1"))]
    steps = [e for e in every if not e.get("traced")]
    if w.get("valid") and not all(k in w for k in ("first_step", "last_step", "stretches")):
        out.append("a valid window does not state its first and last step and its stretches")
    by_n = {e.get("n", e.get("step")): e for e in steps}
    stated = w.get("stretches")
    if stated is None and _num(w.get("first_step")) and by_n:  # a record from before windows stated their stretches
        stated = [[int(w["first_step"]), max(n for n in by_n if _num(n))]]
    held = [[by_n[n] for n in range(a, b + 1) if n in by_n] for a, b in (stated or [])]
    win = [s for part in held for s in part]
    if not win:
        return out
    limit = stretches.limit(win)
    for part in held:
        for prev, cur in itertools.pairwise(part):
            if stretches.gap(prev, cur) > limit:
                out.append(f"the window holds a pause of {stretches.gap(prev, cur):.2f} s between steps "
                           f"{prev.get('n')} and {cur.get('n')} (longer than {limit:.2f} s)")
    rate = summary.get("images_per_s")
    own = sum(s.get("images") or 0 for s in win) / max(sum(stretches.duration(s) for s in win), 1e-12)
    if ranks:
        rates = [float(r["images_per_s"]) for r in ranks if _num(r.get("images_per_s"))]
        if len(rates) == len(ranks) and _num(rate) and abs(sum(rates) / rate - 1) > RATE_AGREEMENT:
            out.append(f"images/s {rate:.1f} is not the ranks' summed {sum(rates):.1f}")
        rate = next((r.get("images_per_s") for r in ranks if r.get("rank") == 0), None)
    # (a window of fewer than 2 steps reports the latter half of the run instead, marked invalid: record/summary.py)
    if len(win) >= 2 and _num(rate) and own > 0 and abs(rate / own - 1) > RATE_AGREEMENT:
        out.append(f"images/s {rate:.1f} differs from the window's images over its step times ({own:.1f}) by more "
                   f"than {RATE_AGREEMENT:.0%}")
    depth = w.get("prefetch_depth") or 0
    parts = [[s for s in p if not s.get("traced")] for p in stretches.split(every)]  # as the window cuts them
    where = {id(s): (k, i) for k, p in enumerate(parts) for i, s in enumerate(p)}
    level = bounds.steady_level(parts[0], depth) if parts and w.get("evidence") == "occupancy" else None
    served = {k: bounds.refill(p, depth, w.get("evidence") or "fixed rule", level)
              for k, p in enumerate(parts) if k > 0 and p}  # the stretches that follow a pause
    early = [s for s in win if where[id(s)][0] in served and where[id(s)][1] < served[where[id(s)][0]]]
    if early:
        out.append(f"{len(early)} window steps (the first: {early[0].get('n')}) were served from the loader's queue "
                   "as it stood when a pause ended")
    return out
