"""What the facts of runs must never contradict: related facts cover the same span, shares are shares, per-step
counts are per training step. A violation is a bug in how a fact was computed (or a damaged record), not a finding:
the tests check these on every recorded profile and on generated records."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any, TypeGuard

SHARES = ("run.data_wait_share", "run.val_share", "trace.gpu_busy_share", "trace.short_kernel_share",
          "trace.tensor_core_share")
PER_STEP = ("trace.kernels_per_step", "trace.syncs_per_step")
SPREAD = 2.0  # per-step counts of one model at other batch sizes stay within this factor of each other


def _num(v: Any) -> TypeGuard[float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


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
