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


def test_sampled_figures_come_from_the_training_steps_of_the_window_not_the_pause():
    """NVML's utilisation and the CPU over the window's stretches only: the samples taken during validation (GPU
    nearly idle, CPU busy with the validation loader) are left out, and so are those of another train() call."""
    from fakes import epochs

    from yolodoctor.diagnosis.facts import from_profile
    from yolodoctor.record.profile import Profile
    from yolodoctor.record.summary import summarise

    ev = epochs(60, 2, step_s=0.1, pause_s=10.0)
    other = epochs(60, 1, train_index=1, t=ev[-1]["t1"] + 30.0)
    summary = summarise(ev + other, {"workers": 0})
    assert summary.get("train_index", 0) in (0, 1)
    main = summary.get("train_index", 0)
    steps = [e for e in ev + other if e["train_index"] == main]
    paused = (steps[59]["t1"], steps[60]["t0"])
    samples = [{"type": "sampler_start", "cpu_count": 16}]
    t = steps[0]["t0"] - 5
    while t < other[-1]["t1"] + 5:
        in_pause = paused[0] < t < paused[1]
        in_main = steps[0]["t0"] <= t <= steps[-1]["t1"]
        util = 14 if in_pause else 62 if in_main else 5
        samples.append({"type": "sample", "t": t, "gpu": {"util": util}, "cpu": {"total": 90 if in_pause else 30}})
        t += 0.1
    prof = Profile(settings={"device": "cuda:0", "batch": 8, "workers": 0}, summary=summary)
    f = from_profile(prof, events=ev + other, samples=samples)
    assert f["gpu.util_mean"] == 62 and f["cpu.total_pct"] == 30
    assert f["run.pauses"] == 1 and abs(f["run.pause_s"] - 10.0) < 1e-6
    assert 0 < f["run.pause_share"] < 1 and f["run.training_s"] > 0


def test_the_monitors_rolling_window_leaves_a_validation_pause_out(tmp_path):
    """The monitor's 30 s window over the live files: a validation pause inside it enters neither the rate nor the
    sampled figures."""
    import json

    from fakes import epochs

    from yolodoctor.diagnosis.facts import live

    ev = epochs(60, 2, step_s=0.2, pause_s=8.0)  # 12 s an epoch, 8 s of validation: all inside 30 s
    t_pause = (ev[59]["t1"], ev[60]["t0"])
    samples = [{"type": "sampler_start", "t": 0.0}]
    samples += [{"type": "sample", "t": i * 0.25, "gpu": {"util": 10 if t_pause[0] < i * 0.25 < t_pause[1] else 70}}
                for i in range(int(ev[-1]["t1"] / 0.25))]
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in
                                                   [{"type": "settings", "t": 0.0, "settings": {"workers": 0}}, *ev]))
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    f = live(tmp_path, window_s=30.0)
    assert abs(f["run.images_per_s"] - 8 / 0.201) < 0.5  # with the pause inside: about 25% lower
    assert f["gpu.util_mean"] == 70


# check's facts of a decode-bound training on an H100 host with 16 cores (1,500 train and 300 val 1080p PNGs,
# 2026-12-07), where filling cache='ram' took 25 s of setup
PNG_CHECK = {"dataset.task": "detect", "dataset.images.train": 1500, "dataset.images.val": 300, "cpu.count": 16,
             "io.read_ms_per_image": 1.148, "io.decode_ms_median": 68.351, "io.resize_ms_median": 3.274}


def test_the_cache_fill_is_every_train_and_val_image_decoded_once_on_ultralytics_threads():
    from yolodoctor.diagnosis.facts import from_check

    fill = from_check(PNG_CHECK)["check.cache_fill_s"]
    assert abs(fill - 1800 * 72.773 / 1000 / 8) < 1e-6  # 16.4 s: 8 threads (min(8, 16 - 1)), a lower bound of 25 s
    two_cores = from_check(dict(PNG_CHECK, **{"cpu.count": 2}))["check.cache_fill_s"]
    assert abs(two_cores - 8 * fill) < 1e-6  # one thread
    classify = from_check(dict(PNG_CHECK, **{"dataset.task": "classify"}))["check.cache_fill_s"]
    assert abs(classify - 1800 * (72.773 - 3.274) / 1000 / 8) < 1e-6  # full resolution: no resize
    assert "check.cache_fill_s" not in from_check({k: v for k, v in PNG_CHECK.items() if k != "io.decode_ms_median"})
