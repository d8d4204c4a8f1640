"""`fix --verify`'s report: speed-ups as factors with their interval beside seconds per epoch, and the trials' own
output (Ultralytics' progress bars) kept out of it."""

import math
import statistics

import pytest
from rich.console import Console

from yolodoctor.commands import fix
from yolodoctor.fixing import fix as fixfix
from yolodoctor.fixing.candidates import candidates
from yolodoctor.fixing.judge import judge
from yolodoctor.fixing.planner import Change, Plan
from yolodoctor.fixing.records import TrialReport, TrialRun


def trial_set(base, cache):
    plan = Plan(changes=[Change("args", "cache", None, "ram", "DL204 expensive-decode")])
    cands = candidates(plan)
    rs = [TrialRun(n, i, f"/r/{n}{i}", "complete", None, v, True) for n, vals in (("baseline", base),
                                                                                   ("cache=ram", cache))
          for i, v in enumerate(vals)]
    verdicts, spread, kept, noise = judge(rs, cands)
    return plan, cands, TrialReport(rs, verdicts, spread, kept, noise)


def test_a_speedup_is_the_ratio_of_medians_with_the_t_interval_of_the_trials_noise():
    _, cands, t = trial_set([14.0, 15.0], [40.0, 44.0])
    up = fix.speedups(t, cands)["cache=ram"]
    assert up["over"] == "baseline" and up["factor"] == pytest.approx(42.0 / 14.5)
    # pooled deviation over both configurations, 2 degrees of freedom: t(0.975, 2) = 4.303
    # (each side at the pooled deviation, or its own where larger), on the log of the ratio
    dev = t.noise.deviation
    half = 4.303 * math.sqrt(sum(max(dev, statistics.stdev(g) / statistics.fmean(g)) ** 2 / 2
                                 for g in ([14.0, 15.0], [40.0, 44.0])))
    assert up["low"] == pytest.approx(up["factor"] * math.exp(-half), rel=1e-3)
    assert up["high"] == pytest.approx(up["factor"] * math.exp(half), rel=1e-3)
    _, cands, one = trial_set([14.0], [40.0])  # one repeat each: no noise measured, no interval
    assert fix.speedups(one, cands)["cache=ram"]["low"] is None


def test_the_trials_table_shows_factors_with_intervals_and_seconds_per_epoch():
    _, cands, t = trial_set([14.0, 15.0], [40.0, 44.0])
    con = Console(record=True, width=120)
    fix.print_trials(con, t, cands, images_per_epoch=64)
    text = con.export_text()
    up = fix.speedups(t, cands)["cache=ram"]
    assert f"{up['factor']:.2f}x ({up['low']:.2f}-{up['high']:.2f})" in text
    assert "1x (reference)" in text
    assert f"{64 / 14.5:.1f}" in text and f"{64 / 42.0:.1f}" in text  # s/epoch beside images/s
    assert "cache=ram: +189.7% beats the noise threshold" in text  # the why, one line each under the table


def test_verify_keeps_the_trials_output_off_the_terminal_unless_debug(monkeypatch, tmp_path):
    from yolodoctor.fixing import trials
    from yolodoctor.profiling.watch import current

    plan, cands, t = trial_set([14.0, 15.0], [40.0, 44.0])
    seen = {}

    def fake_run_trials(*a, **kw):
        seen.update(echo=current().echo, debug=current().debug, progress=current().progress, steps=kw["steps"])
        return t

    monkeypatch.setattr(trials, "run_trials", fake_run_trials)

    from types import SimpleNamespace

    prof = SimpleNamespace(settings={"epochs": 20, "images_per_epoch": 64})
    out = fixfix.verify_plan({}, plan, prof, tmp_path / "run", cands, reps=2, max_reps=2, log=lambda m: None,
                          steps=60)
    assert out is t and seen["echo"] is None and not seen["debug"] and seen["progress"] and seen["steps"] == 60
    fixfix.verify_plan({}, plan, prof, tmp_path / "run", cands, reps=2, max_reps=2, log=lambda m: None, debug=True)
    assert seen["echo"] is not None and seen["debug"]
    assert current().progress is None  # only inside
