"""Loss parity: does a change that changes training (precision, batch above nbs, ...) still learn as well?

A trial of such a change is kept only when, besides being faster, its loss is not worse than the baseline's at the
same number of optimizer steps, beyond the noise of the comparison. The curve compared is the mean per-image loss
of each optimizer step (Ultralytics' loss is summed over the batch, and the optimizer steps every ``accumulate``
batches); repeats of one candidate are averaged step by step. The two means over the last fifth of the common
steps (at least 3) are compared; the band is two standard errors of their difference, and never below FLOOR.
A lower loss passes: parity here means "not worse", which is what a user giving up bit-identical training needs.

The same functions serve the H200 benchmark's loss comparison of the applied plan with the defaults
(bench/report_h200.py).
"""

from __future__ import annotations

import statistics
from typing import Any, Iterable

FLOOR = 0.02  # a relative loss difference under 2% is never called a regression, however small the noise


def opt_curve(steps: Iterable[dict[str, Any]]) -> list[float]:
    """Mean per-image loss of each optimizer step, from step records (``loss``, ``images``, ``accumulate``, ``n`` or
    ``step``): Ultralytics steps the optimizer at batch ni when ni - last_opt_step >= accumulate (trainer.py)."""
    out, acc, last = [], [], -1
    for s in steps:
        if isinstance(s.get("loss"), (int, float)) and s.get("images"):
            acc.append(s["loss"] / s["images"])
        ni = s.get("n", s.get("step", 0))
        if ni - last >= (s.get("accumulate") or 1):
            last = ni
            if acc:
                out.append(round(sum(acc) / len(acc), 5))
            acc = []
    return out


def loss_gap(a: list[float], b: list[float]) -> dict[str, float] | None:
    """b against a over the last fifth (at least 3) of their common optimizer steps; None under 4 common steps."""
    n = min(len(a), len(b))
    if n < 4:
        return None
    w = max(3, n // 5)
    xa, xb = a[n - w:n], b[n - w:n]
    ma, mb = statistics.fmean(xa), statistics.fmean(xb)
    se = (statistics.variance(xa) / w + statistics.variance(xb) / w) ** 0.5
    return {"opt_steps": n, "window": w, "a": ma, "b": mb, "rel": (mb - ma) / ma if ma else 0.0,
            "two_se_rel": 2 * se / ma if ma else 0.0}


def mean_curve(curves: list[list[float]]) -> list[float]:
    """Step-by-step mean of several repeats' curves, as long as the shortest."""
    curves = [c for c in curves if c]
    if not curves:
        return []
    n = min(len(c) for c in curves)
    return [statistics.fmean(c[i] for c in curves) for i in range(n)]


def parity(base: list[list[float]], cand: list[list[float]], floor: float = FLOOR) -> dict[str, Any] | None:
    """The candidate's loss against the baseline's (both lists of per-repeat opt_curve results); None when there are
    too few common optimizer steps to compare."""
    g = loss_gap(mean_curve(base), mean_curve(cand))
    if g is None:
        return None
    g["band"] = max(g["two_se_rel"], floor)
    g["within"] = g["rel"] <= g["band"]
    return g
