"""Loss parity: does a change still learn as well as unchanged training, beyond how much unchanged training itself
varies?

Each optimizer step gives one point (images seen so far, mean per-image loss of its micro-batches; Ultralytics' loss
is summed over the batch and the optimizer steps every ``accumulate`` batches), so runs of other batch sizes are
compared after the same images. That does not make another batch the same training: BatchNorm normalises over
another batch, and over the warm-up Ultralytics ramps ``accumulate`` from 1 to nbs / batch, so batch 16 takes more
optimizer steps than batch 64 over the same images, a gap that stays after the warm-up. A batch change is therefore
judged as a change to training (judge.reschedules), and ``opt_steps`` says how many steps each side took. The
comparison takes each run's mean over the last fifth of the images compared.

The band is the noise of unchanged training under the user's schedule, measured where it can be: the trials of the
baseline run with another seed at each repeat, and the trials of training-equivalent changes (workers, cache, ...)
are unchanged training too (another worker count draws other augmentation streams, as another seed does). The spread
of those runs' means gives a t-test's band (97.5%, one-sided: a lower loss passes, since parity means "not worse").
Identical curves (repeats of seeded deterministic training) count once: they measure nothing about that noise. With a
single reference run, the band falls back to the curves' own noise over the compared images (their scatter around a
straight line), which cannot see what another seed would do and says so (``band_from``): measured on unchanged CPU
training, one run against one at that band is rejected 15% of the time, so trials.judge does not judge a change to
training on it. Never below ``floor``.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

FLOOR = 0.02  # a relative loss difference under 2% is never called a regression, however small the noise
# a training-equivalent change (workers, cache, ...) is only checked for breakage: its loss against the other runs
# of unchanged training, with this floor under the band, and broken only beyond BROKEN x the band
SAFE_FLOOR = 0.05
BROKEN = 2.0


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


@dataclass
class LossParity:
    """A candidate's loss against a reference's after the same images (parity())."""
    images: int  # the images compared up to
    points: list[int]  # loss points in the compared window: reference, candidate
    runs: list[int]  # runs compared: reference, candidate
    opt_steps: list[int]  # optimizer steps each side took in those images (the fewest of its runs)
    a: float  # the reference's mean loss in the window
    b: float  # the candidate's
    rel: float  # (b - a) / a
    band: float  # how far the loss may move by noise alone (module docstring)
    band_from: str  # "runs" (the reference's runs' spread) or "curve" (one run's scatter)
    reference_spread: float | None  # relative standard deviation of the reference runs' means (None with one)
    within: bool  # not worse than the reference by more than the band
    broken: bool = False  # judged against unchanged training: worse by more than BROKEN x the band
    moved: bool = False  # judged against unchanged training: moved beyond the band either way


def parity(base: list[list[tuple[int, float]]], cand: list[list[tuple[int, float]]],
           floor: float = FLOOR) -> LossParity | None:
    """The candidate's loss against the reference's after the same images (both: per-run opt_points); None when
    fewer than 3 optimizer steps of either side fall in the last fifth of the images compared. The comparison reaches
    as far as every candidate run and the longest reference run; reference runs that end sooner are left out.
    ``opt_steps``: the optimizer steps each side took in those images (the fewest of its runs). ``band``: see the
    module; ``reference_spread``: the relative standard deviation of the reference runs' means (None with one);
    ``within``: the candidate is not worse than the reference by more than the band."""
    base, cand = ([list(r) for r in dict.fromkeys(tuple(r) for r in side if r)] for side in (base, cand))
    if not base or not cand:
        return None
    n = min(min(r[-1][0] for r in cand), max(r[-1][0] for r in base))
    lo = 0.8 * n
    base = [r for r in base if r[-1][0] >= n]  # a run that ends inside the window would weigh its earlier images
    wa = [[(x, y) for x, y in r if lo < x <= n] for r in base]
    wb = [[(x, y) for x, y in r if lo < x <= n] for r in cand]
    if sum(map(len, wa)) < 3 or sum(map(len, wb)) < 3:
        return None
    wa, wb = [w for w in wa if w], [w for w in wb if w]
    ra, rb = [statistics.fmean(y for _, y in w) for w in wa], [statistics.fmean(y for _, y in w) for w in wb]
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    rel = (mb - ma) / ma if ma else 0.0
    spread = statistics.stdev(ra) / ma if len(ra) >= 2 and ma else None
    if len(ra) >= 2:  # runs of unchanged training: their spread is the noise, pooled with the candidate's own
        ss = (len(ra) - 1) * statistics.variance(ra) + ((len(rb) - 1) * statistics.variance(rb) if len(rb) >= 2 else 0)
        df = len(ra) - 1 + max(len(rb) - 1, 0)
        se = (ss / df) ** 0.5 * (1 / len(ra) + 1 / len(rb)) ** 0.5
        band, source = t975(df) * se / ma if ma else 0.0, "runs"
    else:  # one reference run: the curves' scatter around a straight line over the compared images
        se = (_scatter(wa) ** 2 / sum(map(len, wa)) + _scatter(wb) ** 2 / sum(map(len, wb))) ** 0.5
        band, source = 2 * se / ma if ma else 0.0, "curve"
    band = max(band, floor)
    steps = [min(sum(1 for x, _ in r if x <= n) for r in side) for side in (base, cand)]
    return LossParity(images=n, points=[sum(map(len, wa)), sum(map(len, wb))], runs=[len(ra), len(rb)],
                      opt_steps=steps, a=ma, b=mb, rel=rel, band=band, band_from=source, reference_spread=spread,
                      within=rel <= band)


# Student's t, 0.975 quantile, by degrees of freedom; between two listed ones the smaller df's (the stricter)
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042, 60: 2.000, 120: 1.980}


def t975(df: int) -> float:
    return T975[max(k for k in T975 if k <= max(df, 1))]


def _scatter(windows: list[list[tuple[int, float]]]) -> float:
    """The points' standard deviation around each run's own least-squares line (the trend taken out)."""
    res = []
    for w in windows:
        if len(w) < 3:
            continue
        xs, ys = [x for x, _ in w], [y for _, y in w]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        den = sum((x - mx) ** 2 for x in xs)
        b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=False)) / den if den else 0.0
        res += [y - (my + b * (x - mx)) for x, y in w]
    return statistics.stdev(res) if len(res) >= 2 else 0.0
