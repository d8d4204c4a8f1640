"""On a CUDA GPU (run on a GPU machine with `pytest -m gpu`; deselected, not skipped, in the CPU suite)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from yolodoctor.record import profile as record
from yolodoctor.record.events import read_events

pytestmark = [pytest.mark.gpu, pytest.mark.xdist_group("gpu")]  # one at a time on the GPU, under `-n 2` too


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    import torch

    assert torch.cuda.is_available(), "the gpu tests need a CUDA GPU: run them on a GPU machine"
    from yolodoctor.datasets.synth import make_dataset

    return Path(make_dataset(tmp_path_factory.mktemp("ds") / "ds", images=96, val_images=8, width=320, height=240
                             ).yaml_path)


def test_profile_on_cuda_records_events_trace_and_nvml(dataset, tmp_path):
    out = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "yolodoctor", "profile", f"data={dataset}", "imgsz=160", "batch=8",
                        "epochs=3", "workers=2", "plots=False", f"project={tmp_path / 'ul'}", "--steps", "18",
                        "--loader-seconds", "2", "--out", str(out), "--json"], capture_output=True, text=True,
                       timeout=600, env={**os.environ, "YOLO_OFFLINE": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    json.loads(p.stdout)
    prof = record.load(out)
    s = prof.settings
    assert s["device"].startswith("cuda") and s["amp"] is True and s["channels_last"] is True
    steps = [e for e in read_events(out / "events.jsonl") if e["type"] == "step"]
    assert len(steps) == 18 and all(e["gpu_ms"] > 0 and e["loss"] is not None for e in steps)
    assert all(e["mem_allocated_peak"] >= e["mem_allocated"] > 0 for e in steps)  # the step's peak, not its rest
    # fp16 AMP: the GradScaler's scale at the end, 2**16 halved once per skipped (overflowing) optimizer step
    end = next(e for e in read_events(out / "events.jsonl") if e["type"] == "train_end")
    assert s["grad_scaler"] is True and 1.0 <= end["grad_scale"] <= 2.0 ** 16
    assert (end["grad_scale"]).is_integer() and (2.0 ** 16 / end["grad_scale"]).is_integer()
    t = prof.trace["summary"]
    assert t["cuda"] is True and t["kernels_per_step"] > 50 and t["kernel_busy_ms_per_step"] > 0
    assert 0 < t["tensor_core_share"] <= 1 and t["launches_per_step"] > 0
    samples = [e for e in read_events(out / "samples.jsonl")]
    start = samples[0]
    assert start["type"] == "sampler_start" and start["gpu"]["match"] == "uuid"
    gpu = [e["gpu"] for e in samples if e["type"] == "sample" and e.get("gpu")]
    assert gpu and any(g["util"] is not None for g in gpu) and any(g["mem_used"] for g in gpu)
    roles = [e["roles"]["train_worker"]["count"] for e in samples if e["type"] == "sample"]
    assert max(roles) == 2  # the two train-loader workers were classified
    assert prof.loader_capacity["images_per_s"] > 0 and prof.loader_capacity["workers"] == 2


def test_check_sees_the_gpu():
    p = subprocess.run([sys.executable, "-m", "yolodoctor", "check", "--json"], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "YOLO_OFFLINE": "1"})
    facts = json.loads(p.stdout)["facts"]
    assert facts["env.cuda_available"] and facts["env.nvml"] and facts["env.device_map"][0]["nvml_index"] is not None
    assert facts["gpu.supports_bf16"] is True


def test_allocator_counters_equal_torchs_own_functions():
    import torch

    from yolodoctor.profiling.recorder import allocator_counters

    keep = [torch.empty(2 ** k, device="cuda") for k in range(4, 20)]
    del keep[3:6]
    cuda = torch.cuda
    assert allocator_counters(cuda) == {"mem_allocated": cuda.memory_allocated(),
                                        "mem_allocated_peak": cuda.max_memory_allocated(),
                                        "mem_reserved": cuda.memory_reserved(),
                                        "mem_reserved_peak": cuda.max_memory_reserved()}
    assert allocator_counters(cuda)["mem_allocated"] >= sum(t.numel() * 4 for t in keep)


def test_a_bounded_profile_past_a_short_epoch_records_the_loader_queue_on_cuda(dataset, tmp_path):
    # 96 images at batch 8: 12 batches, one epoch; 4 workers prefetch 16 batches, more than the epoch holds. Without
    # --steps such a short training is measured whole; --steps 68 runs past the epoch's end and judges its window
    # from the queue's occupancy
    out = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "yolodoctor", "profile", f"data={dataset}", "imgsz=160", "batch=8",
                        "epochs=1", "workers=4", "plots=False", f"project={tmp_path / 'ul'}", "--no-trace",
                        "--steps", "68", "--loader-seconds", "0", "--out", str(out), "--json"], capture_output=True,
                       text=True,
                       timeout=600, env={**os.environ, "YOLO_OFFLINE": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    prof = record.load(out)
    steps = [e for e in read_events(out / "events.jsonl") if e["type"] == "step"]
    assert prof.settings["workers"] == 4 and prof.settings["batches_per_epoch"] == 12
    assert len(steps) >= 20 + 3 * 16 and {s["epoch"] for s in steps} == {0}
    assert all(0 <= s["ready"] <= 16 for s in steps) and max(s["ready"] for s in steps) > 0
    w = prof.summary["window"]
    assert w["evidence"] == "occupancy" and (w["valid"] or "draining" in w["why"] or "rate moved" in w["why"]), w


def test_a_whole_cuda_run_takes_its_steady_figures_from_its_training_steps(dataset, tmp_path):
    """Three whole epochs with loader workers on CUDA: validation between them, a queue that refills during it; the
    window holds training steps only (no pause, no refilled step, its rate its steps')."""
    from yolodoctor.diagnosis.diagnose import diagnose
    from yolodoctor.diagnosis.invariants import window_violations

    out = tmp_path / "all"
    p = subprocess.run([sys.executable, "-m", "yolodoctor", "profile", f"data={dataset}", "imgsz=160", "batch=4",
                        "epochs=3", "workers=2", "plots=False", f"project={tmp_path / 'ul'}", "--all",
                        "--loader-seconds", "0", "--out", str(out)], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "YOLO_OFFLINE": "1"})
    assert p.returncode in (0, 1), p.stderr[-3000:]
    prof = record.load(out)
    events = list(read_events(out / "events.jsonl"))
    assert prof.summary["pauses"]["epoch_ends"] == 2
    assert window_violations(prof.summary, events) == []
    d = diagnose(out)
    assert d.facts["run.pauses"] == 2 and d.facts["run.val_s"] > 0
