"""The profile command's table: how the rate is labelled beside what its window could measure."""

from pathlib import Path

from yolodoctor.commands.profile import summary_rows
from yolodoctor.record.profile import load
from yolodoctor.record.rederive import resummarise

ROOT = Path(__file__).resolve().parents[2]


def test_a_rate_measured_in_the_warmups_ramp_is_noted_as_such():
    # a bounded H200 profile of 121 steps in a 20-epoch training at batch 16: the warm-up raises the accumulation
    # from 1 to 4 batches per optimizer step until about step 1,250, past any bound
    run = ROOT / "fixtures/profiles/h200-defaults"
    prof = load(run)
    prof.summary, _ = resummarise(run, prof.summary)
    w = prof.summary["window"]
    assert w["valid"] and w["in_warmup"] and w["warmup_needs"] > 1000
    _, rows, notes = summary_rows(prof, {})
    assert "warm-up" in notes["summary.images_per_s"] and ("steady rate", "summary.images_per_s") in rows
    # a profile past the ramp (batch 128: one batch per optimizer step, nothing ramps) has no such note
    run = ROOT / "fixtures/profiles/h100-b128w14-cache-ram"
    prof = load(run)
    prof.summary, _ = resummarise(run, prof.summary)
    assert not prof.summary["window"]["in_warmup"]
    assert "summary.images_per_s" not in summary_rows(prof, {})[2]
