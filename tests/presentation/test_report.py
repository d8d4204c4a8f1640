"""What a person reads: facts in human units, the settings Ultralytics changed with who changed them and why."""

import pytest
from rich.console import Console

from yolodoctor.findings import Finding, Severity
from yolodoctor.presentation import report


@pytest.mark.parametrize("key,value,text", [
    ("run.data_wait_share", 0.002959, "0.3%"),
    ("run.data_wait_share", 0.7658, "77%"),
    ("cpu.saturated_share", 0.0, "0%"),
    ("gpu.mem_fraction_peak", 0.026, "2.6% of the card"),
    ("summary.step_s_median", 0.2819, "282 ms"),
    ("run.epoch_s", 12.6, "12.6 s"),
    ("check.decode_ms", 31.62, "31.6 ms"),
    ("trace.kernel_busy_ms_per_step", 150.0, "150 ms"),
    ("gpu.mem_total", 150.8e9, "140.4 GB"),
    ("mem.shm_free_min", 64 * 2 ** 20, "64 MB"),
    ("ul.cache_required_gb", 3.25, "3.2 GB"),
    ("summary.images_per_s", 39.21, "39.2 images/s"),
    ("loader.capacity_images_per_s", 77.91, "77.9 images/s"),
    ("io.read_mb_s", 809.2, "809 MB/s"),
    ("cpu.train_thread_pct", 87.5, "88% of a core"),
    ("cpu.total_pct", 100.0, "100%"),
    ("gpu.util_mean", 5.583, "5.6%"),
    ("loader.headroom", 1.273, "1.27x"),
    ("settings.workers", 8.0, "8"),
    ("run.complete", True, "yes"),
    ("settings.cache", "ram", "ram"),
])
def test_facts_read_in_human_units(key, value, text):
    assert report.human(key, value) == text


def test_evidence_is_shown_in_human_units():
    f = Finding("DL201", "x", "dataloader", Severity.warning, "m.",
                evidence={"run.data_wait_share": 0.002959, "run.compute_s": 0.061, "cpu.count": 16.0})
    con = Console(record=True, width=100)
    report.render_findings(con, [f], "t")
    text = con.export_text()
    assert "run.data_wait_share: 0.3%" in text and "run.compute_s: 61 ms" in text and "cpu.count: 16" in text
    assert "0.002959" not in text


CPU_RUN = {"run.device": "cpu", "settings.workers_asked": 2.0, "settings.workers": 0.0,
           "settings.workers_why": "on the CPU Ultralytics loads in the training process (workers=0)",
           "settings.amp_requested": "true", "settings.precision": "fp32",
           "ul.amp_unchecked": "AMP does nothing on the CPU: the training ran in float32",
           "settings.batch_requested": 8.0, "run.batch": 8.0}


def test_a_setting_ultralytics_changed_says_who_changed_it_and_why():
    notes = report.setting_notes(CPU_RUN, {"workers": 2})
    assert notes["settings.workers"] == ("changed by Ultralytics from workers=2 (asked): on the CPU Ultralytics loads "
                                         "in the training process (workers=0)")
    assert notes["settings.precision"] == ("changed by Ultralytics from amp=True (its default): AMP does nothing on "
                                           "the CPU")
    assert "run.batch" not in notes  # ran as asked
    con = Console(record=True, width=200)
    report.render_facts(con, CPU_RUN, [("workers", "settings.workers"), ("batch", "run.batch")], notes)
    assert "0  changed by Ultralytics from workers=2 (asked)" in con.export_text()


def test_batch_changes_name_autobatch_or_the_out_of_memory_halving():
    auto = report.setting_notes({"settings.batch_requested": -1.0, "run.batch": 37.0})  # a script's: who asked?
    assert auto["run.batch"] == "changed by Ultralytics from batch=-1: AutoBatch chose it"
    halved = report.setting_notes({"settings.batch_requested": 64.0, "run.batch": 32.0, "run.oom_retries": 1.0},
                                  {"batch": 64})
    assert halved["run.batch"].endswith("(asked): it halved the batch after running out of memory")
    refused = report.setting_notes({"settings.cache_requested": "ram", "ul.cache_refused": True,
                                    "ul.cache_required_gb": 40.0, "ul.cache_available_gb": 12.5}, {"cache": "ram"})
    assert refused["settings.cache"].endswith("its RAM guard trained uncached (it wanted 40.0 GB, 12.5 GB available)")


def test_a_fix_with_nothing_to_change_is_printed_as_a_note_not_a_fix():
    from yolodoctor.findings import Fix

    con = Console(record=True, width=200)
    only_note = Finding("SY201", "frequent-syncs", "launch", Severity.info, "Syncs.",
                        fix=Fix(note="custom callbacks should avoid .item()"))
    change = Finding("DL201", "dataloader-too-few-workers", "dataloader", Severity.warning, "Waits.",
                     fix=Fix(args={"workers": 5}))
    report.render_findings(con, [only_note, change], "findings")
    text = con.export_text()
    assert "note: custom callbacks should avoid .item()" in text and "fix: custom" not in text
    assert "fix: workers=5" in text


@pytest.mark.parametrize("v,text", [(0.0002, "0.0002"), (0.25, "0.25"), (0.0, "0"), (12.5, "12.5"), (10000.0, "10000"),
                                    (2500.0, "2500")])
def test_chart_ticks_read_without_exponents(v, text):
    from yolodoctor.presentation.html import _tick_label

    assert _tick_label(v) == text
