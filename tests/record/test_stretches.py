"""A whole run's steady figures come from its training steps: pauses (validation, an epoch's end) never enter a
rate, and the steps served from the queue that refilled during a pause are left out of the window."""

import pytest
from fakes import epochs

from yolodoctor.diagnosis.invariants import window_violations
from yolodoctor.record import bounds, stretches
from yolodoctor.record.summary import summarise


def test_steps_split_at_pauses_epochs_and_train_calls():
    ev = epochs(30, 3)
    parts = stretches.split(ev)
    assert [len(p) for p in parts] == [30, 30, 30]
    gaps = stretches.pauses(parts)
    assert [round(g["seconds"], 6) for g in gaps] == [5.0, 5.0] and all(g["epoch_end"] for g in gaps)
    # a pause inside an epoch (a callback that saves every N steps) cuts it too; a short gap does not
    ev = epochs(40, 1)
    for s in ev[20:]:
        s["t0"] += 2.0
        s["t1"] += 2.0
    assert [len(p) for p in stretches.split(ev)] == [20, 20]
    ev = epochs(40, 1)
    for s in ev[20:]:
        s["t0"] += 0.05
        s["t1"] += 0.05
    assert [len(p) for p in stretches.split(ev)] == [40]
    two = epochs(30, 1) + epochs(30, 1, train_index=1, t=100.0)
    assert len(stretches.split(two)) == 2 and stretches.pauses(stretches.split(two)) == []


def test_a_validation_pause_never_enters_the_rate_of_a_whole_run():
    ev = epochs(24, 3, step_s=0.25, pause_s=0.8)  # the CPU case: 12 ... steps an epoch, 0.8 s of validation
    s = summarise(ev, {"workers": 0})
    w = s["window"]
    assert w["valid"] and len(w["stretches"]) >= 2
    own = 8 / (0.25 + 0.001)
    assert s["images_per_s"] == pytest.approx(own, rel=0.01)  # the pause would make it ~10% lower
    assert s["pauses"]["count"] == 2 and s["pauses"]["seconds"] == pytest.approx(1.6, abs=1e-6)
    assert s["training_s"] == pytest.approx(72 * 0.251, rel=1e-6)
    assert s["seconds"] == pytest.approx(s["training_s"] + 1.6, rel=1e-6)
    assert window_violations(s, ev) == []


def test_the_steps_served_from_the_refilled_queue_are_left_out():
    depth = 16
    # loader-bound: the queue is empty in the steady state and full (16) when a pause ends, draining one a step
    ev = epochs(120, 3, ready=lambda e, i: max(depth - 1 - i, 0) if e else 0, fast_refill=depth)
    s = summarise(ev, {"workers": 4, "prefetch_factor": 4})
    w = s["window"]
    assert w["valid"] and w["evidence"] == "occupancy" and w["refill_skipped"] == 2 * depth
    assert [b - a + 1 for a, b in w["stretches"]][1:] == [120 - depth, 120 - depth]
    assert s["images_per_s"] == pytest.approx(8 / 0.101, rel=0.01)  # the fast refill steps would inflate it
    assert window_violations(s, ev) == []
    # without the occupancy, the whole prefetch depth is left out after a pause
    for x in ev:
        x.pop("ready")
    w = summarise(ev, {"workers": 4, "prefetch_factor": 4})["window"]
    assert w["evidence"] == "fixed rule" and [a for a, _ in w["stretches"][1:]] == [120 + depth, 240 + depth]


def test_epochs_shorter_than_the_queue_leave_no_steady_window_and_say_so():
    ev = epochs(63, 4, step_s=0.15)  # the 128-image batches of an 8,000-image dataset, 64 batches in flight
    s = summarise(ev, {"workers": 16, "prefetch_factor": 4})
    w = s["window"]
    assert not w["valid"] and w["steps"] == 0 and "no steady stretch is left" in w["why"]
    assert "(63, 63, 63, 63 steps)" in w["why"]


def test_epochs_whose_rates_differ_give_the_last_phase():
    fast = epochs(40, 2, step_s=0.1)
    slow = epochs(40, 2, step_s=0.2, t=fast[-1]["t1"] + 5.0, n0=80)  # mosaic closed: another rate
    for x in slow:
        x["epoch"] += 2
    s = summarise(fast + slow, {"workers": 0})
    w = s["window"]
    assert w["valid"] and "phase" in w and w["first_step"] >= 80
    assert s["images_per_s"] == pytest.approx(8 / 0.201, rel=0.02)


def test_the_invariants_catch_a_window_across_a_pause():
    ev = epochs(60, 2)
    bad = summarise(ev, {"workers": 0})
    bad["window"]["stretches"] = [[20, 119]]  # as windows were taken before: first step to last
    span = ev[-1]["t1"] - ev[20]["t0"]
    bad["images_per_s"] = 100 * 8 / span
    found = window_violations(bad, ev)
    assert any("pause of 5.00 s" in v for v in found) and any("differs from the window's images" in v for v in found)
    assert any("served from the loader's queue" in v for v in found)  # step 60, the first after the pause


def test_the_refill_of_a_stretch_is_the_queue_as_the_pause_left_it():
    part = [{"ready": 9}, {"ready": 8}]
    assert bounds.refill(part, 32, "occupancy") == 10
    assert bounds.refill(part, 8, "occupancy") == 8
    assert bounds.refill(part, 32, "fixed rule") == 32
    assert bounds.refill(part, 0, "no queue") == 1


def test_a_queue_that_stays_full_is_the_gpu_setting_the_pace_and_its_refilled_steps_are_steady():
    # the H100 matrix's decode-bound PNG training with cache='ram' and 15 workers: a 60-batch queue, 63-batch epochs,
    # the queue full all along (the GPU side is the limit). Leaving out 60 refill steps after each pause left 3 steps
    # an epoch, the epochs' ends, whose rate differed by 76%: no window. Served from a queue at its steady level, they
    # are the steady rate.
    depth = 60
    ev = epochs(63, 3, ready=lambda e, i: depth - 1)
    s = summarise(ev, {"workers": 15, "prefetch_factor": 4})
    w = s["window"]
    assert w["valid"] and w["refill_skipped"] == 2  # the first step after each pause (the switch back) only
    assert [b - a + 1 for a, b in w["stretches"]] == [63 - bounds.SETTLE, 62, 62]
    assert s["images_per_s"] == pytest.approx(8 / 0.101, rel=0.01)
    assert window_violations(s, ev) == []


def test_a_refill_is_left_out_only_where_the_pause_left_the_queue_fuller_than_the_run_keeps_it():
    part = [{"ready": 30}, {"ready": 20}, {"ready": 12}, {"ready": 4}, {"ready": 3}]
    assert bounds.refill([{"ready": 30}] * 40, 32, "occupancy", level=30.0) == 1  # full and kept full: steady pace
    assert bounds.refill(part, 32, "occupancy", level=30.0) == 31  # shorter than its refill, and draining
    assert bounds.refill(part, 32, "occupancy", level=3.0) == 31  # an empty steady queue: all it made in the pause
    assert bounds.refill(part, 32, "occupancy", level=None) == 31  # no level known: every batch made in the pause


def test_epochs_shorter_than_the_queue_with_the_queue_kept_full_are_steady():
    # the H100 matrix's fp32 yolo11m training: 1,000 images at batch 32 (32 steps an epoch) and a 32-batch queue kept
    # full by 8 workers. Every stretch after a pause ended inside its refill, so all 288 steps were left out, and 12
    # steps of the first epoch, one of them slow, gave 102 images/s for a training that ran 225 over its training
    # steps.
    depth = 32
    ev = epochs(32, 10, step_s=0.11, images=32, ready=lambda e, i: depth - 1)
    ev[31]["compute"] += 2.0  # one slow step at the first epoch's end
    ev[31]["t1"] += 2.0
    for x in ev[32:]:
        x["t0"] += 2.0
        x["t1"] += 2.0
    s = summarise(ev, {"workers": 8, "prefetch_factor": 4})
    w = s["window"]
    assert w["valid"] and w["refill_skipped"] == 9  # the switch back from each validation only
    assert s["images_per_s"] == pytest.approx(32 / 0.111, rel=0.1)
    assert window_violations(s, ev) == []
    # the same short epochs with a loader that cannot keep up: the refilled queue drains across each stretch, so
    # those steps are left out and the window keeps to the first epoch's settled steps
    slow = epochs(32, 10, step_s=0.11, images=32, ready=lambda e, i: max(depth - 1 - i, 0) if e else 0)
    w = summarise(slow, {"workers": 8, "prefetch_factor": 4})["window"]
    assert w["refill_skipped"] == 9 * 32 and w["stretches"] == [[20, 31]]


def test_a_queue_that_drains_after_the_refill_is_a_loader_that_cannot_keep_up():
    # a first stretch whose loader kept the queue full, then a stretch whose loader falls behind: after the batches
    # made in the pause the queue empties, so those batches came early and are left out
    part = [{"ready": 15}] + [{"ready": max(14 - i, 0)} for i in range(40)]
    assert bounds.refill(part, 16, "occupancy", level=15.0) == 16
    full = [{"ready": 15}] * 40  # the queue stays as full: the GPU side sets the pace
    assert bounds.refill(full, 16, "occupancy", level=15.0) == 1
