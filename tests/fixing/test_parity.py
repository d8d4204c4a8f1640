"""Loss parity for changes that change training: the curve per optimizer step, the comparison, and the judge."""

from yolodoctor.fixing.parity import mean_curve, opt_curve, opt_points, parity
from yolodoctor.fixing.planner import Change, Plan
from yolodoctor.fixing.trials import TrialRun, candidates, judge


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
    # two reference runs 5% apart (safe changes, or none): a candidate 4% above their mean is within their spread
    lo, hi = curve(1.95, wobble=0.0), curve(2.05, wobble=0.0)
    p = parity([lo, hi], [curve(2.08, wobble=0.0)])
    assert 0.049 < p["reference_spread"] < 0.051 and p["band"] == p["reference_spread"] and p["within"]
    assert not parity([lo, hi], [curve(2.2, wobble=0.0)])["within"]


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
        "steps against 40; band 2.5%)" in bad.why
    # slower or not, a change whose loss is worse is rejected: no repeat would make it learn as before
    slow = {x.candidate: x for x in judge(base + runs("amp=bf16", [401, 405], curve(2.4)), cands)[0]}["amp=bf16"]
    assert slow.rejected and not slow.inconclusive and "its loss is +20.0%" in slow.why
    none = {x.candidate: x for x in judge(base + runs("amp=bf16", [480, 482], None), cands)[0]}["amp=bf16"]
    assert not none.kept and "could not be compared" in none.why
    # a safe change needs no loss comparison
    batch = Change("args", "batch", 16, 64, "LA201 t")
    v2 = {x.candidate: x for x in judge(base + runs("batch=64", [600, 605]), candidates(Plan(changes=[batch])))[0]}
    assert v2["batch=64"].kept and v2["batch=64"].parity is None
