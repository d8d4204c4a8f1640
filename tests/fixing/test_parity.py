"""Loss parity for changes that change training: the curve per optimizer step, the comparison, and the judge."""

import pytest

from yolodoctor.fixing.candidates import Candidate, candidates
from yolodoctor.fixing.judge import judge
from yolodoctor.fixing.parity import mean_curve, opt_curve, opt_points, parity
from yolodoctor.fixing.planner import Change, Plan
from yolodoctor.fixing.records import TrialRun


def curve(level: float, n: int = 40, wobble: float = 0.01, per_step: int = 64) -> list[tuple[int, float]]:
    """(images seen, per-image loss) of n optimizer steps of per_step images: a falling loss with a deterministic
    wobble, ending near `level`."""
    total = n * 64
    return [(per_step * (i + 1), level * (1 + 0.5 * (total - per_step * (i + 1)) / total)
             * (1 + wobble * ((i * 7) % 5 - 2))) for i in range(n * 64 // per_step)]


def test_opt_curve_averages_the_micro_batches_of_each_optimizer_step():
    steps = [{"n": i, "loss": 16.0 * (i + 1), "images": 16, "accumulate": 2} for i in range(6)]
    # Ultralytics starts with last_opt_step = -1: optimizer steps at n = 1, 3, 5 (ni - last >= 2), each over the two
    # micro-batches since the last; per-image losses 1..6
    assert opt_curve(steps) == [1.5, 3.5, 5.5]
    assert opt_curve(steps[:5]) == [1.5, 3.5]  # micro-batch 4 waits for its optimizer step
    assert opt_points(steps) == [(32, 1.5), (64, 3.5), (96, 5.5)]  # images seen at each optimizer step


def test_parity_passes_an_equal_or_lower_loss_and_fails_a_higher_one():
    base = [curve(2.0), curve(2.0)]
    assert parity(base, [curve(2.0)]).within
    assert parity(base, [curve(1.6)]).within  # learning faster is no regression
    worse = parity(base, [curve(2.3)])
    assert not worse.within and 0.14 < worse.rel < 0.16 and worse.band >= 0.02
    assert parity(base, [curve(2.0, n=3)]) is None  # too few optimizer steps in the compared images
    # twice the images per optimizer step (batch 2 x nbs): compared after the same images, not the same steps
    big = parity(base, [curve(2.0, per_step=128)])
    assert big.within and big.images == 40 * 64 and big.points[1] == 4
    assert big.opt_steps == [40, 20]  # the steps each side took in those images: half at twice the batch
    assert not parity(base, [curve(2.2, per_step=128)]).within
    assert mean_curve([[1.0, 2.0, 3.0], [3.0, 4.0]]) == [2.0, 3.0]


def test_parity_reaches_as_far_as_the_longest_reference_run_and_widens_by_its_spread():
    # the baseline's short trial beside a longer safe one: compared after the safe one's images, not the baseline's
    short, long = curve(2.0, n=10), curve(2.0, n=40)
    p = parity([short, long], [curve(2.0, n=60, per_step=128)])
    assert p.images == 40 * 64 and p.opt_steps == [40, 20] and p.points[0] == 8  # the short run is left out
    # a reference run that ends inside the window is left out (its points would sit at fewer images)
    mid = curve(2.0, n=36)
    assert parity([mid, long], [curve(2.0, n=40)]).points[0] == 8
    # identical curves (repeats of seeded deterministic training) are one measurement: one reference run, whose band
    # comes from the curves' own scatter over the compared images
    same = parity([long, list(long)], [curve(2.0, n=40)])
    assert same.runs == [1, 1] and same.points[0] == 8 and same.band_from == "curve"
    assert same.reference_spread is None and same.band >= 0.02


def test_the_band_is_the_spread_of_unchanged_training_under_other_seeds():
    # three runs of unchanged training (other seeds, other worker counts) 5% apart (sd), the candidate's two runs:
    # a t-test at 3 degrees of freedom on the pooled spread of the runs' means
    ref = [curve(level, wobble=0.0) for level in (1.9, 2.0, 2.1)]
    p = parity(ref, [curve(2.2, wobble=0.0), curve(2.3, wobble=0.0)])
    assert p.runs == [3, 2] and p.band_from == "runs"
    assert p.reference_spread == pytest.approx(0.05)
    pooled = ((2 * 0.1 ** 2 + 1 * 0.005) / 3) ** 0.5  # the means' variances, pooled; relative to 2.0 below
    assert p.band == pytest.approx(3.182 * pooled * (1 / 3 + 1 / 2) ** 0.5 / 2.0, rel=1e-6)
    assert p.rel == pytest.approx(0.125) and p.within  # 12.5% worse, inside a 13.3% band
    assert not parity(ref, [curve(2.3, wobble=0.0), curve(2.4, wobble=0.0)]).within  # 17.5% is not
    # the same candidate against runs that agree closely is a regression: the band follows the noise measured
    tight = [curve(level, wobble=0.0) for level in (1.99, 2.0, 2.01)]
    assert not parity(tight, [curve(2.1, wobble=0.0), curve(2.11, wobble=0.0)]).within


def runs(name, values, loss=None):
    return [TrialRun(name, i, f"/r/{name}{i}", "complete", None, v, True, [], loss) for i, v in enumerate(values)]


def seeded(name, values, levels, n=40):
    """Trial runs of one candidate whose repeats ran other seeds: each its own curve."""
    return [TrialRun(name, i, f"/r/{name}{i}", "complete", None, v, True, [], curve(lv, n=n, wobble=0.0))
            for i, (v, lv) in enumerate(zip(values, levels, strict=False))]


def test_a_faster_change_that_changes_training_is_kept_only_with_loss_parity():
    bf16 = Change("args", "amp", True, "bf16", "PR202 t", "unsafe", changes_training=True)
    cands = candidates(Plan(changes=[bf16]))
    base = seeded("baseline", [400, 404], [1.98, 2.02])  # two seeds of unchanged training, 2% apart
    ok = judge(base + seeded("amp=bf16", [480, 482], [2.0, 2.04]), cands)
    v = {x.candidate: x for x in ok[0]}["amp=bf16"]
    assert v.kept and "loss +1.0%" in v.why and v.parity.within and [c.key for c in ok[2]] == ["amp"]
    bad = {x.candidate: x for x in judge(base + seeded("amp=bf16", [480, 482], [2.4, 2.42]), cands)[0]}["amp=bf16"]
    assert not bad.kept and bad.rejected
    assert "its loss is +20.5% against unchanged training's after 2560 images (40 optimizer steps against 40; band " \
        in bad.why
    # slower or not, a change whose loss is worse is rejected: no repeat would make it learn as before
    slow = {x.candidate: x for x in judge(base + seeded("amp=bf16", [401, 405], [2.4, 2.42]), cands)[0]}["amp=bf16"]
    assert slow.rejected and not slow.inconclusive and "its loss is +20.5%" in slow.why
    none = {x.candidate: x for x in judge(base + runs("amp=bf16", [480, 482], None), cands)[0]}["amp=bf16"]
    assert not none.kept and "could not be compared" in none.why
    # a safe change with no loss recorded needs no loss comparison
    batch = Change("args", "batch", 16, 64, "LA201 t")
    v2 = {x.candidate: x for x in judge(base + runs("batch=64", [600, 605]), candidates(Plan(changes=[batch])))[0]}
    assert v2["batch=64"].kept and v2["batch=64"].parity is None


def test_a_training_equivalent_change_is_checked_for_breakage_never_rejected_for_noise():
    bf16 = Change("args", "amp", True, "bf16", "PR202 t", "unsafe", changes_training=True)
    cache = Change("args", "cache", False, "ram", "IO201 t")
    cands = candidates(Plan(changes=[cache, bf16]))
    base = seeded("baseline", [400, 404], [1.98, 2.02])
    bf = seeded("amp=bf16", [480, 482], [2.0, 2.02])
    # cache='ram' 25% faster, its curves 7% above the baseline's (the cache's RAM check shifts the random streams):
    # beyond the seeds' band, far from broken - kept, and the move reported with its cause
    moved = {x.candidate: x for x in judge(base + seeded("cache=ram", [500, 505], [2.13, 2.15]) + bf, cands)[0]}
    c = moved["cache=ram"]
    assert c.kept and not c.rejected and c.parity.moved and not c.parity.broken
    assert "its loss moved +7.0%" in c.why and "RAM-cache check reads 30 random images" in c.why
    # one that learns 60% worse broke training: rejected however fast, and left out of the reference
    broken = seeded("cache=ram", [500, 505], [3.2, 3.22])
    v = {x.candidate: x for x in judge(base + broken + bf, cands)[0]}
    assert v["cache=ram"].rejected and not v["cache=ram"].kept and not v["cache=ram"].inconclusive
    assert v["cache=ram"].why.endswith(": a change meant to keep training broke it")
    assert v["amp=bf16"].parity.runs[0] == 2  # the baseline's two seeds only
    # and it does not come in with a faster whole plan
    plan = seeded("plan", [560, 566], [2.0, 2.02])
    _verdicts, _, kept, _ = judge(base + broken + bf + plan, cands)
    assert all(x.key != "cache" for x in kept)
    # nor with a candidate stacked on it whose own loss looks fine (measured over it, it would bring it in)
    det = Change("args", "deterministic", True, False, "CF201 t")
    cands2 = [Candidate("baseline", []), Candidate("cache=ram", [cache]),
              Candidate("cache=ram+deterministic=False", [cache, det], against="cache=ram")]
    rs = base + broken + seeded("cache=ram+deterministic=False", [600, 606], [2.0, 2.01])
    v2, _, kept2, _ = judge(rs, cands2)
    assert kept2 == [] and not v2[2].kept
    assert v2[2].why == "its reference cache=ram was rejected: its loss broke away from unchanged training's"


def test_the_judge_takes_the_safe_candidates_runs_into_the_reference_but_not_unclean_ones():
    bf16 = Change("args", "amp", True, "bf16", "PR202 t", "unsafe", changes_training=True)
    cache = Change("args", "cache", False, "ram", "IO201 t")
    cands = candidates(Plan(changes=[cache, bf16]))
    base = seeded("baseline", [400, 404], [1.98, 2.02])  # the short trial: the start of the same training
    for r in base:
        r.loss_curve = r.loss_curve[:20]
    bf = seeded("amp=bf16", [480, 482], [2.3, 2.32])

    def verdict(safe):
        return {x.candidate: x for x in judge(base + safe + bf, cands)[0]}["amp=bf16"]

    long = verdict(runs("cache=ram", [420, 425], curve(2.0, n=40)))
    assert long.parity.images == 40 * 64 and long.parity.opt_steps == [40, 40] and long.rejected
    # a safe trial that ran something else, or failed, is no reference: back to the baseline's images
    odd = [TrialRun("cache=ram", i, "/r", "complete", None, 420.0, True, ["cache: asked ram, ran False"],
                    curve(2.0, n=40)) for i in range(2)]
    failed = [TrialRun("cache=ram", i, "/r", "failed", "OOM", None, None, [], curve(2.0, n=40)) for i in range(2)]
    for safe in (odd, failed):
        assert verdict(safe).parity.images == 20 * 64
