"""The recorded runs that crossed epochs: their steady figures come from their training steps alone."""

from pathlib import Path

from yolodoctor.diagnosis.diagnose import diagnose
from yolodoctor.presentation.verdict import verdict
from yolodoctor.record.events import read_events

PROFILES = Path(__file__).resolve().parents[2] / "fixtures" / "profiles"


def test_the_compiled_h200_run_is_judged_on_its_training_steps_not_its_validation():
    run = PROFILES / "h200-b64w16-reduce-overhead"
    d = diagnose(run)
    w = d.profile.summary["window"]
    # epoch 0's steps from 84, then epoch 1 after the 11.3 s validation and the 64 steps its refilled queue served
    assert w["valid"] and w["stretches"] == [[84, 124], [189, 211]] and w["refill_skipped"] == 64
    steps = {e["n"]: e for e in read_events(run / "events.jsonl") if e["type"] == "step"}
    held = [steps[n] for a, b in w["stretches"] for n in range(a, b + 1)]
    own = sum(s["images"] for s in held) / sum(s["wait"] + s["compute"] for s in held)
    assert abs(d.facts["run.images_per_s"] / own - 1) < 0.02 and d.facts["run.images_per_s"] > 850  # not 404
    assert d.facts["gpu.util_mean"] > 55  # the samples of its steps, not the 14% of the validation's
    assert d.facts["run.pause_s"] > 11 and d.facts["run.pauses"] == 1
    v = verdict(d.facts, d.reported, run, d.profile)
    assert v.bound != "host" and "LA203" not in [f.id for f in d.findings]
    assert d.facts["loader.headroom"] < 1.3  # the loader alone (976 images/s) is close to the training's rate


def test_the_cpu_saturated_h200_run_has_no_steady_window_and_says_why():
    d = diagnose(PROFILES / "h200-b128w16-cpu-saturated")
    assert d.facts["run.window_valid"] is False
    assert "(63, 63, 63, 23 steps)" in d.facts["run.window_why"] and "RN201" in [f.id for f in d.findings]
    assert d.facts["run.pauses"] == 3 and d.facts["run.val_s"] > 4
