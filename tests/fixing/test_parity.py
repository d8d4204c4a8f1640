"""Loss parity for changes that change training: the curve per optimizer step, the comparison, and the judge."""

import pytest

from yolodoctor.fixing.parity import mean_curve, opt_curve, opt_points, parity
from yolodoctor.fixing.planner import Change, Plan
from yolodoctor.fixing.trials import Candidate, TrialRun, candidates, judge


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
    assert parity(base, [curve(2.0)])["within"]
    assert parity(base, [curve(1.6)])["within"]  # learning faster is no regression
    worse = parity(base, [curve(2.3)])
    assert not worse["within"] and 0.14 < worse["rel"] < 0.16 and worse["band"] >= 0.02
    assert parity(base, [curve(2.0, n=3)]) is None  # too few optimizer steps in the compared images
    # twice the images per optimizer step (batch 2 x nbs): compared after the same images, not the same steps
    big = parity(base, [curve(2.0, per_step=128)])
    assert big["within"] and big["images"] == 40 * 64 and big["points"][1] == 4
    assert big["opt_steps"] == [40, 20]  # the steps each side took in those images: half at twice the batch
    assert not parity(base, [curve(2.2, per_step=128)])["within"]
    assert mean_curve([[1.0, 2.0, 3.0], [3.0, 4.0]]) == [2.0, 3.0]


def test_parity_reaches_as_far_as_the_longest_reference_run_and_widens_by_its_spread():
    # the baseline's short trial beside a longer safe one: compared after the safe one's images, not the baseline's
    short, long = curve(2.0, n=10), curve(2.0, n=40)
    p = parity([short, long], [curve(2.0, n=60, per_step=128)])
    assert p["images"] == 40 * 64 and p["opt_steps"] == [40, 20] and p["points"][0] == 8  # the short run is left out
    # a reference run that ends inside the window is left out (its points would sit at fewer images)
    mid = curve(2.0, n=36)
    assert parity([mid, long], [curve(2.0, n=40)])["points"][0] == 8
    # two reference runs 5% either side of their mean (safe changes): a candidate no worse than the worse of them is
    # within unchanged training's own spread, one worse than both is not
    lo, hi = curve(1.9, wobble=0.0), curve(2.1, wobble=0.0)
    p = parity([lo, hi], [curve(2.1, wobble=0.0)])
    assert p["reference_spread"] == pytest.approx(0.05) and p["band"] == p["reference_spread"] and p["within"]
    assert not parity([lo, hi], [curve(2.12, wobble=0.0)])["within"]
    # repeats that computed the same curve (seeded, deterministic) are one measurement: no spread, no extra points
    same = parity([long, list(long)], [curve(2.0, n=40)])
    assert same["points"][0] == 8 and same["reference_spread"] == 0.0


def runs(name, values, loss=None):
    return [TrialRun(name, i, f"/r/{name}{i}", "complete", None, v, True, [], loss) for i, v in enumerate(values)]


def test_a_faster_change_that_changes_training_is_kept_only_with_loss_parity():
    bf16 = Change("args", "amp", True, "bf16", "PR202 t", "unsafe", changes_training=True)
    cands = candidates(Plan(changes=[bf16]))
    base = runs("baseline", [400, 404], curve(2.0))
    ok = judge(base + runs("amp=bf16", [480, 482], curve(2.01)), cands)
    v = {x.candidate: x for x in ok[0]}["amp=bf16"]
    assert v.kept and "loss +0.5%" in v.why and v.parity["within"] and [c.key for c in ok[2]] == ["amp"]
    bad = {x.candidate: x for x in judge(base + runs("amp=bf16", [480, 482], curve(2.4)), cands)[0]}["amp=bf16"]
    assert not bad.kept and "its loss is +20.0% against unchanged training's after 2560 images (40 optimizer " \
        "steps against 40; band 3.7%)" in bad.why
    # slower or not, a change whose loss is worse is rejected: no repeat would make it learn as before
    slow = {x.candidate: x for x in judge(base + runs("amp=bf16", [401, 405], curve(2.4)), cands)[0]}["amp=bf16"]
    assert slow.rejected and not slow.inconclusive and "its loss is +20.0%" in slow.why
    none = {x.candidate: x for x in judge(base + runs("amp=bf16", [480, 482], None), cands)[0]}["amp=bf16"]
    assert not none.kept and "could not be compared" in none.why
    # a safe change needs no loss comparison
    batch = Change("args", "batch", 16, 64, "LA201 t")
    v2 = {x.candidate: x for x in judge(base + runs("batch=64", [600, 605]), candidates(Plan(changes=[batch])))[0]}
    assert v2["batch=64"].kept and v2["batch=64"].parity is None


def test_a_safe_change_that_moves_the_loss_is_rejected_and_left_out_of_the_reference():
    bf16 = Change("args", "amp", True, "bf16", "PR202 t", "unsafe", changes_training=True)
    cache = Change("args", "cache", False, "ram", "IO201 t")
    cands = candidates(Plan(changes=[cache, bf16]))
    base = runs("baseline", [400, 404], curve(2.0, n=40)[:20])
    bf = runs("amp=bf16", [480, 482], curve(2.0, n=40))
    # cache='ram' 25% faster and learning as the baseline does: kept, its loss checked and within
    same = {x.candidate: x for x in judge(base + runs("cache=ram", [500, 505], curve(2.0, n=40)) + bf, cands)[0]}
    assert same["cache=ram"].kept and same["cache=ram"].parity["within"] and same["cache=ram"].parity["rel"] == 0.0
    assert "loss" not in same["cache=ram"].why  # a safe change's verdict speaks of its speed
    assert same["amp=bf16"].kept and same["amp=bf16"].parity["images"] == 40 * 64  # the safe trial's reach
    # the same speed but 10% worse over the baseline's images: a bug, not a safe change - rejected however fast, and
    # the changes that do change training fall back to the baseline's images
    worse = [(x, y * 1.1) for x, y in curve(2.0, n=40)]
    v = {x.candidate: x for x in judge(base + runs("cache=ram", [500, 505], worse) + bf, cands)[0]}
    assert v["cache=ram"].rejected and not v["cache=ram"].kept and not v["cache=ram"].inconclusive
    assert v["cache=ram"].parity["images"] == 20 * 64 and v["cache=ram"].parity["rel"] == pytest.approx(0.1, abs=1e-3)
    assert v["cache=ram"].why.startswith("+25.0%, but its loss is +10.0% against the baseline's after 1280 images")
    assert v["cache=ram"].why.endswith(": a change meant to keep training changed it")
    assert v["amp=bf16"].parity["images"] == 20 * 64
    # and it does not come in with a faster whole plan
    plan = runs("plan", [560, 566], curve(2.0, n=40))
    verdicts, _, kept, _ = judge(base + runs("cache=ram", [500, 505], worse) + bf + plan, cands)
    assert all(x.key != "cache" for x in kept)
    # nor with a candidate stacked on it whose own loss looks fine (measured over it, it would bring it in)
    det = Change("args", "deterministic", True, False, "CF201 t")
    cands2 = [Candidate("baseline", []), Candidate("cache=ram", [cache]),
              Candidate("cache=ram+deterministic=False", [cache, det], against="cache=ram")]
    rs = (base + runs("cache=ram", [500, 505], worse)
          + runs("cache=ram+deterministic=False", [600, 606], curve(2.0, n=40)))
    v2, _, kept2, _ = judge(rs, cands2)
    assert kept2 == [] and not v2[2].kept
    assert v2[2].why == "its reference cache=ram was rejected: its loss moved against the baseline's"
    # a safe change is rejected only for a clear move: 4% worse over the baseline's short trial is not one
    slight = [(x, y * 1.04) for x, y in curve(2.0, n=40)]
    v3 = {x.candidate: x for x in judge(base + runs("cache=ram", [500, 505], slight) + bf, cands)[0]}
    assert v3["cache=ram"].kept and v3["cache=ram"].parity["band"] == 0.05


def test_the_judge_takes_the_safe_candidates_runs_into_the_reference_but_not_unclean_ones():
    bf16 = Change("args", "amp", True, "bf16", "PR202 t", "unsafe", changes_training=True)
    cache = Change("args", "cache", False, "ram", "IO201 t")
    cands = candidates(Plan(changes=[cache, bf16]))
    base = runs("baseline", [400, 404], curve(2.0, n=40)[:20])  # the short trial: the start of the same training
    bf = runs("amp=bf16", [480, 482], curve(2.3, n=40))

    def verdict(safe):
        return {x.candidate: x for x in judge(base + safe + bf, cands)[0]}["amp=bf16"]

    long = verdict(runs("cache=ram", [420, 425], curve(2.0, n=40)))
    assert long.parity["images"] == 40 * 64 and long.parity["opt_steps"] == [40, 40] and long.rejected
    # a safe trial that ran something else, or failed, is no reference: back to the baseline's images
    odd = [TrialRun("cache=ram", i, "/r", "complete", None, 420.0, True, ["cache: asked ram, ran False"],
                    curve(2.0, n=40)) for i in range(2)]
    failed = [TrialRun("cache=ram", i, "/r", "failed", "OOM", None, None, [], curve(2.0, n=40)) for i in range(2)]
    for safe in (odd, failed):
        assert verdict(safe).parity["images"] == 20 * 64
