"""Ultralytics' silent behaviours as findings: the messages it logs (their exact 8.4 texts), read into facts, and the
rules that name them, including those only a GPU run produces."""

import pytest

from yolodoctor.diagnosis import facts as facts_mod
from yolodoctor.diagnosis.engine import evaluate
from yolodoctor.diagnosis.rules import load_rules
from yolodoctor.profiling.ultralytics_log import LogWatch, classify
from yolodoctor.record.profile import Profile

GB = 1 << 30
# as Ultralytics 8.4.190 logs them (utils/checks.py, utils/autobatch.py, data/base.py, data/utils.py, utils/tal.py)
TEXTS = {
    "amp_skipped": "\x1b[34m\x1b[1mAMP: \x1b[0mchecks skipped. Offline and unable to download YOLO26n for AMP checks. "
                   "Setting 'amp=True'. If you experience zero-mAP or NaN losses you can disable AMP with amp=False.",
    "amp_failed": "AMP: checks failed. Anomalies were detected with AMP on your system that may lead to NaN losses or "
                  "zero-mAP results, so AMP will be disabled during training.",
    "cache_refused": "train: 52.1GB RAM required to cache images with 100% safety margin but only 20.3/125.7GB "
                     "available, not caching images",
    "files_slow": "train: Slow image access detected (ping: 12.3±4.1 ms, read: 8.2±1.0 MB/s, size: 512.0 KB). Use "
                  "local storage instead of remote/mounted storage for better performance.",
    "autobatch_chosen": "AutoBatch: Using batch-size 37 for CUDA:0 75.60G/79.19G (95%) ✅",
    "autobatch_default": "AutoBatch: Requires torch.backends.cudnn.benchmark=False, using default batch-size 16",
    "assigner_per_image": "CUDA out of memory in TaskAlignedAssigner with batch_size=64 and max_num_obj=120; retrying "
                          "assignment one image at a time on GPU. Model forward batch size is unchanged.",
    "oom_halved": "CUDA out of memory with batch=16. Reducing to batch=8 and retrying (1/3).",
}


@pytest.mark.parametrize("kind", sorted(TEXTS))
def test_each_logged_behaviour_is_recognised(kind):
    assert classify(TEXTS[kind])[0] == kind
    assert classify("Starting training for 3 epochs...") is None


def run_facts(settings, kinds=(), reserved=None):
    events = [{"type": "ultralytics_log", "kind": k, "level": "warning", "figures": classify(TEXTS[k])[1]}
              for k in kinds]
    if reserved:
        events += [{"type": "step", "i": i, "n": i, "step": i, "t0": i, "t1": i + 0.5, "wait": 0, "compute": 0.5,
                    "images": 37, "batch": 37, "mem_reserved_peak": reserved, "mem_allocated_peak": reserved // 2}
                   for i in range(3)]
    prof = Profile(settings={"device": "cuda:0", **settings}, status="complete")
    f = facts_mod.from_profile(prof, events=events, samples=[])
    return f, {x.id: x for x in evaluate(load_rules(), f)[0]}


def test_gpu_only_behaviours_are_named():
    f, found = run_facts({"amp_requested": True, "amp": False}, ["amp_failed"])
    assert f["ul.amp_check"] == "failed" and "PR204" in found and "check: failed" in found["PR204"].message
    f, found = run_facts({"amp_requested": True, "amp": True}, ["amp_skipped"])
    assert "PR204" not in found and "stayed on unverified" in found["PR205"].message
    assert "Offline and unable to download" in found["PR205"].message
    f, found = run_facts({"amp_requested": "bf16", "amp": True})
    assert f["ul.amp_check"] == "not-run" and "amp='bf16' skips" in found["PR205"].message
    f, found = run_facts({"batch": 37}, ["autobatch_chosen"], reserved=int(0.55 * 79.19 * GB))
    assert f["ul.autobatch_batch"] == 37 and f["ul.autobatch_target"] == 0.95
    assert "MM208" in found and "-40%" in found["MM208"].message  # 55% used against a 95% aim
    assert "MM208" not in run_facts({"batch": 37}, ["autobatch_chosen"], reserved=int(0.93 * 79.19 * GB))[1]
    _, found = run_facts({}, ["autobatch_default"])
    assert "cudnn.benchmark=False" in found["MM207"].message
    _, found = run_facts({"batch": 64}, ["assigner_per_image"], reserved=GB)
    assert "one image at a time" in found["MM206"].message and found["MM206"].fix.args == {"batch": 18}
    _, found = run_facts({}, ["files_slow"])
    assert "read: 8.2±1.0 MB/s" in found["IO202"].message
    f, found = run_facts({"cache_requested": "ram", "cache": None}, ["cache_refused"])
    assert f["ul.cache_required_gb"] == 52.1 and f["ul.cache_available_gb"] == 20.3 and "MM101" in found
    _, found = run_facts({"cache_requested": "ram", "cache": "ram", "mosaic": True, "mosaic_buffer": False})
    assert "DL207" in found and "MM101" not in found
    _, found = run_facts({"cuda_launch_blocking": "1", "anomaly_detection": False})
    assert "CF204" in found and "CF205" not in found
    _, found = run_facts({"workers_asked": 16, "workers": 8})
    assert "caps workers at os.cpu_count() per visible GPU" in found["DL102"].message


def test_the_watch_records_what_ultralytics_logs_and_puts_its_logger_back():
    import ultralytics.utils.autobatch as ab

    seen, own = [], ab.LOGGER
    w = LogWatch(lambda kind, level, figures, text: seen.append((kind, level, figures)))
    w.start()
    assert ab.LOGGER is not own
    ab.LOGGER.warning(TEXTS["autobatch_default"])
    ab.LOGGER.info("nothing to note")
    w.stop()
    assert ab.LOGGER is own and seen == [("autobatch_default", "warning", ["Requires torch.backends.cudnn."
                                                                            "benchmark=False", "16"])]
