"""Facts read off the event stream: validation share and allocator fragmentation (both wrong in the frozen rules'
first H200 scenarios, see BENCHMARKS.md)."""

from yolodoctor.diagnosis.facts import _event_facts


def step(n, **mem):
    return {"type": "step", "step": n, "t0": n, "t1": n + 0.1, "images": 8, **mem}


def epoch(i, t_end, seconds, val_s):
    return [{"type": "epoch_end", "epoch": i, "train_index": 0, "t": t_end, "seconds": seconds},
            {"type": "fit_epoch_end", "epoch": i, "train_index": 0, "t": t_end + val_s}]


def test_a_bounded_run_that_crossed_epochs_reports_their_validation_share():
    events = [*epoch(0, 30.0, 30.0, 13.0), *epoch(1, 52.0, 9.0, 5.0), *epoch(2, 66.0, 9.0, 4.0),
              {"type": "bounded", "t": 80.0}, *epoch(3, 80.0, 14.0, 0.3)]
    f = {}
    _event_facts(f, events)
    # epochs 0-2 validated for real (the median is epoch 2's 4 / 13); epoch 3 stopped and skipped validation
    assert abs(f["run.val_share"] - 4.0 / 13.0) < 1e-9


def test_a_bounded_run_inside_one_epoch_has_no_validation_share():
    f = {}
    _event_facts(f, [step(0), {"type": "bounded", "t": 5.0}, *epoch(0, 5.0, 5.0, 0.2)])
    assert "run.val_share" not in f


def test_fragmentation_compares_reserved_with_the_steps_peak_not_the_resting_allocation():
    gib = 1 << 30
    f = {}
    _event_facts(f, [step(i, mem_allocated=2 * gib, mem_allocated_peak=100 * gib, mem_reserved=130 * gib)
                     for i in range(3)])
    assert f["gpu.torch_allocated_max"] == 100 * gib and abs(f["gpu.reserved_over_allocated"] - 1.3) < 1e-9


def test_without_the_peak_fragmentation_is_unknown_and_stays_missing():
    gib = 1 << 30
    f = {}
    _event_facts(f, [step(i, mem_allocated=2 * gib, mem_reserved=130 * gib) for i in range(3)])
    assert "gpu.reserved_over_allocated" not in f and f["gpu.torch_reserved_max"] == 130 * gib
