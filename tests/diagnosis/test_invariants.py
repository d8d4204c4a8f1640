"""The facts never contradict themselves: on every recorded profile, on generated records, and a deliberately
inconsistent record is caught."""

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from yolodoctor.diagnosis import facts as facts_mod
from yolodoctor.diagnosis.diagnose import diagnose
from yolodoctor.diagnosis.invariants import across, violations, window_violations
from yolodoctor.record.events import read_events
from yolodoctor.record.profile import Profile

PROFILES = Path(__file__).resolve().parents[2] / "fixtures" / "profiles"
RUNS = sorted(p for p in PROFILES.iterdir() if (p / "profile.json").exists())
GB = 1 << 30


def test_every_recorded_profile_holds_the_invariants():
    seen = []
    for run in RUNS:
        d = diagnose(run)
        events = list(read_events(run / "events.jsonl"))
        assert violations(d.facts, events) == [], run.name
        assert window_violations(d.profile.summary, events, d.profile.ranks) == [], run.name
        seen.append((d.profile.args.get("model", "?"), d.facts))
    assert across(seen) == []
    assert len({m for m, _ in seen}) >= 2


def steps_from(draw_steps, total):
    """Step events as the recorder writes them on CUDA: each step's allocator peaks (reset after every step), an
    epoch's first step whose peak spans what came before it (setup, AutoBatch, a failed attempt)."""
    out, n = [], 0
    for epoch, (setup_peak, per_step) in enumerate(draw_steps):
        for i, (alloc, extra) in enumerate(per_step):
            peak = setup_peak if i == 0 else alloc
            reserved_peak = min(peak + extra, total)
            out.append({"type": "step", "epoch": epoch, "i": i, "n": n, "step": n, "t0": n * 0.1 + 0.01,
                        "t1": n * 0.1 + 0.1, "wait": 0.01, "compute": 0.09, "images": 16, "batch": 16,
                        "mem_allocated": alloc // 2, "mem_allocated_peak": min(peak, reserved_peak),
                        "mem_reserved": reserved_peak, "mem_reserved_peak": reserved_peak, "loss": 1.0})
            n += 1
    return out


step_mem = st.tuples(st.integers(1, 60 * GB), st.integers(0, 10 * GB))
epochs = st.lists(st.tuples(st.integers(1, 80 * GB), st.lists(step_mem, min_size=1, max_size=8)), min_size=1,
                  max_size=4)


@settings(max_examples=80, deadline=None)
@given(epochs)
def test_generated_records_hold_the_invariants(draw):
    total = 80 * GB
    events = steps_from(draw, total)
    samples = [{"type": "sampler_start", "gpu": {"mem_total": total}},
               {"type": "sample", "t": 0.05, "gpu": {"mem_total": total, "mem_used": GB, "util": 50}}]
    prof = Profile(settings={"device": "cuda:0", "batch": 16, "workers": 0, "epochs": len(draw)},
                   summary={"images_per_s": 100.0, "data_wait_share": 0.1, "window": {"valid": True, "steps": 5}},
                   status="complete")
    f = facts_mod.from_profile(prof, events=events, samples=samples)
    assert violations(f, events) == []


def test_a_deliberately_inconsistent_record_fails_them():
    total = 80 * GB
    events = steps_from([(GB, [(GB, 0), (2 * GB, GB)])], total)
    events[1]["mem_allocated_peak"] = 4 * GB  # allocated beyond what the allocator reserved in the same step
    prof = Profile(settings={"device": "cuda:0", "batch": 16}, status="complete")
    f = facts_mod.from_profile(prof, events=events, samples=[])
    assert any("exceeds gpu.torch_reserved_max" in v for v in violations(f))
    assert violations({"run.data_wait_share": 1.2}) == ["run.data_wait_share 1.2 is not a share in [0, 1]"]
    assert violations({"gpu.torch_reserved_max": 2.0, "gpu.mem_total": 1.0})
    traced = [{"type": "step", "epoch": e, "n": n, "traced": True} for e, n in ((0, 62), (1, 63))]
    assert "spans 2 epochs" in violations({}, traced)[0]
    assert across([("yolo11n.yaml", {"trace.kernels_per_step": 1900.0}),
                   ("yolo11n.yaml", {"trace.kernels_per_step": 1850.0}),
                   ("yolo11n.yaml", {"trace.kernels_per_step": 26445.0})])  # the batch-128 window past an epoch end


def test_the_batch_that_ran_and_the_halvings_come_from_the_steps():
    # an OOM halving in the first epoch: the settings (written at on_train_start) hold the batch before it, the
    # retry count Ultralytics resets once the epoch completes
    steps = [{"type": "step", "epoch": 0, "i": i, "n": i, "step": i, "t0": i, "t1": i + 0.5, "wait": 0.0,
              "compute": 0.5, "images": b, "batch": b} for i, b in enumerate([16, 8, 8, 8])]
    events = [*steps, {"type": "oom_retry", "t": 0.7, "epoch": 0, "retry": 1, "batch": 8},
              {"type": "fit_epoch_end", "t": 5.0, "epoch": 0, "oom_retries": 0, "batch": 8}]
    prof = Profile(settings={"device": "cuda:0", "batch": 16}, status="complete")
    f = facts_mod.from_profile(prof, events=events, samples=[])
    assert f["run.oom_retries"] == 1.0 and f["run.batch"] == 8.0 and f["run.batch_started"] == 16.0
    # without the retry event (an older record), the halving in the steps still counts
    f2 = facts_mod.from_profile(prof, events=[e for e in events if e["type"] != "oom_retry"], samples=[])
    assert f2["run.oom_retries"] == 1.0


@settings(max_examples=60, deadline=None)
@given(st.integers(12, 150), st.integers(1, 5), st.floats(0.01, 0.5), st.floats(0.0, 30.0), st.integers(0, 16),
       st.booleans())
def test_generated_whole_runs_with_pauses_hold_the_window_invariants(per_epoch, n_epochs, step_s, pause_s, workers,
                                                                      occupancy):
    """Whole runs of any shape (epoch length, epochs, step time, validation pause, queue depth, with or without the
    queue's occupancy): the window never holds a pause or a refilled step, and its rate is its steps'."""
    from fakes import epochs

    from yolodoctor.record.summary import summarise

    depth = 4 * workers
    ready = (lambda e, i: max(depth - 1 - i, 0) if e else 0) if occupancy and depth else None
    ev = epochs(per_epoch, n_epochs, step_s=step_s, pause_s=pause_s, ready=ready, fast_refill=min(depth, per_epoch))
    s = summarise(ev, {"workers": workers, "prefetch_factor": 4})
    assert window_violations(s, ev) == []
    if s["window"]["valid"]:
        assert s["window"]["stretches"] and s["window"]["first_step"] <= s["window"]["last_step"]


def test_a_window_too_short_to_report_states_its_steps_without_claiming_their_rate():
    # 21-step epochs behind a 64-batch queue: one settled step is left, and the summary reports the run's latter
    # half instead, marked invalid (found by the generated runs above)
    from fakes import epochs

    from yolodoctor.record.summary import summarise

    ev = epochs(21, 2, step_s=0.5, pause_s=0.0, ready=lambda e, i: max(63 - i, 0) if e else 0, fast_refill=21)
    s = summarise(ev, {"workers": 16, "prefetch_factor": 4})
    assert not s["window"]["valid"] and window_violations(s, ev) == []
