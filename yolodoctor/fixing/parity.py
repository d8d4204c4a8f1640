"""Loss parity: does a change that changes training (precision, batch above nbs, ...) still learn as well?

A trial of such a change is kept only when, besides being faster, its loss is not worse than unchanged training's
after the same number of training images: a user's run is a number of epochs, so a change that halves the optimizer
steps (a batch twice nbs) must show that it learns as much from the same images. Unchanged training is the baseline
and every trial of safe changes (each first held to the baseline's own curve, trials.judge: a safe change must not
move the loss beyond noise): the baseline's trial, at the smallest batch, is the shortest, and on the H200 its 1920
images from scratch (15 optimizer steps at batch 128) were decided by the fp16 GradScaler's skipped first steps,
which flattered bf16 (-11.5%) and sank fp16 batch 128 (+19.5%); over the 12,352 images the safe trials reached,
bf16 was +3.9% and batch 128 +34% (BENCHMARKS.md, issue-6 notes). Each optimizer step gives one point (images seen
so far, mean per-image loss of its micro-batches; Ultralytics' loss is summed over the batch and the optimizer steps
every ``accumulate`` batches). Over the last fifth of the images compared, the points of all runs are pooled per
side and their means compared; the band is two standard errors of the difference or the reference runs' own
spread, never below FLOOR (SAFE_FLOOR where trials.judge holds a safe change to the baseline). A lower loss
passes: parity means "not worse", which is what giving up bit-identical training needs. Points also make the
comparison immune to the warm-up, when Ultralytics ramps ``accumulate`` up from 1.

The H200 benchmark compares the applied plan with the defaults at the same number of optimizer steps, as its issue
asks (``opt_curve`` and ``loss_gap``); safe changes keep the images per optimizer step, so there both axes agree.
"""

from __future__ import annotations

import statistics
from typing import Any, Iterable

FLOOR = 0.02  # a relative loss difference under 2% is never called a regression, however small the noise
# a safe change is held to the baseline over the baseline's short trial only (on the H200 1920 images, about 30
# optimizer steps from scratch, where the GradScaler's skipped first steps move the loss by a few percent) and a
# failure costs the change for good: only a clear move rejects it (the H200's safe trials: 1.2-2.5% below)
SAFE_FLOOR = 0.05


def opt_curve(steps: Iterable[dict[str, Any]]) -> list[float]:
    """Mean per-image loss of each optimizer step, from step records (``loss``, ``images``, ``accumulate``, ``n`` or
    ``step``): Ultralytics steps the optimizer at batch ni when ni - last_opt_step >= accumulate (trainer.py)."""
    return [loss for _, loss in opt_points(steps)]


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


def opt_points(steps: Iterable[dict[str, Any]]) -> list[tuple[int, float]]:
    """(images seen, mean per-image loss) at each optimizer step, as opt_curve decides the steps."""
    out, acc, last, seen = [], [], -1, 0
    for s in steps:
        seen += s.get("images") or 0
        if isinstance(s.get("loss"), (int, float)) and s.get("images"):
            acc.append(s["loss"] / s["images"])
        ni = s.get("n", s.get("step", 0))
        if ni - last >= (s.get("accumulate") or 1):
            last = ni
            if acc:
                out.append((seen, round(sum(acc) / len(acc), 5)))
            acc = []
    return out


def mean_curve(curves: list[list[float]]) -> list[float]:
    """Step-by-step mean of several repeats' curves, as long as the shortest."""
    curves = [c for c in curves if c]
    if not curves:
        return []
    n = min(len(c) for c in curves)
    return [statistics.fmean(c[i] for c in curves) for i in range(n)]


def parity(base: list[list[tuple[int, float]]], cand: list[list[tuple[int, float]]],
           floor: float = FLOOR) -> dict[str, Any] | None:
    """The candidate's loss against the reference's after the same images (both: per-repeat opt_points); None when
    fewer than 3 optimizer steps of either side fall in the last fifth of the images compared. The reference is
    training as it was: the baseline's runs and those of candidates that do not change training (trials.judge), so
    that the longest of them, not the baseline's short trial, sets how far the comparison reaches. ``opt_steps``: the
    optimizer steps each side took in those images (the fewest of its runs that reach them). The band: two standard
    errors of the difference, how much worse the worst reference run is than the reference's mean, or ``floor``,
    whichever is largest. Identical curves (repeats of seeded deterministic training) count once."""
    # repeats that computed the same curve (seeded, deterministic training) are one measurement, not several
    base, cand = ([list(r) for r in dict.fromkeys(tuple(r) for r in side if r)] for side in (base, cand))
    if not base or not cand:
        return None
    # as far as every candidate run and the longest reference run reach: the reference side may hold runs of other
    # lengths (the baseline's short trial beside longer safe ones); those that end sooner have no points there
    n = min(min(r[-1][0] for r in cand), max(r[-1][0] for r in base))
    lo = 0.8 * n
    base = [r for r in base if r[-1][0] >= n]  # a run that ends inside the window would weigh its earlier images
    window = [[y for x, y in r if lo < x <= n] for r in base]
    xa = [y for w in window for y in w]
    xb = [y for r in cand for x, y in r if lo < x <= n]
    if len(xa) < 3 or len(xb) < 3:
        return None
    ma, mb = statistics.fmean(xa), statistics.fmean(xb)
    se = (statistics.variance(xa) / len(xa) + statistics.variance(xb) / len(xb)) ** 0.5
    # unchanged training's own spread: reference runs that differ only by safe changes learn this much worse than
    # their mean, so a candidate no worse than the worst of them shows no change either
    means = [statistics.fmean(w) for w in window if w]
    spread = (max(means) - ma) / ma if len(means) >= 2 and ma else 0.0
    band = max(2 * se / ma if ma else 0.0, floor, spread)
    rel = (mb - ma) / ma if ma else 0.0
    steps = [min(sum(1 for x, _ in r if x <= n) for r in side) for side in (base, cand)]
    return {"images": n, "points": [len(xa), len(xb)], "opt_steps": steps, "a": ma, "b": mb, "rel": rel,
            "band": band, "reference_spread": spread, "within": rel <= band}
