"""`yolodoctor profile` end to end on the CPU: a real Ultralytics training, bounded, re-readable, crash-safe."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from yolodoctor.record import profile as record
from yolodoctor.record.events import read_events

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # each test runs a training


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    from yolodoctor.datasets.synth import make_dataset

    info = make_dataset(tmp_path_factory.mktemp("ds") / "ds", images=24, val_images=4, width=160, height=120,
                        workers=1)
    return Path(info.yaml_path)


def yd(*args, cwd, timeout=300):
    return subprocess.run([sys.executable, "-m", "yolodoctor", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env={**os.environ, "YOLO_OFFLINE": "1"})


def train_args(dataset, tmp_path):
    return [f"data={dataset}", "imgsz=64", "batch=4", "epochs=2", "plots=False", f"project={tmp_path / 'ul'}",
            "name=run"]


def test_bounded_profile_writes_a_rereadable_record(dataset, tmp_path):
    out = tmp_path / "prof"
    p = yd("profile", *train_args(dataset, tmp_path), "--steps", "4", "--loader-seconds", "1", "--out", out, "--json",
           cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout)
    assert doc["command"] == "profile" and doc["run_dir"] == str(out)
    # the headline comes with the JSON too: 4 steps hold no steady window, so a longer profile is what comes next
    assert doc["verdict"]["caveat"].startswith("not a steady figure") and doc["verdict"]["next"].startswith(
        "yolodoctor profile model=yolo11n.yaml data=")
    prof = record.load(out)
    assert prof.status == "complete" and prof.summary["steps"] == 4 and prof.summary["bounded"]
    assert prof.settings["device"] == "cpu" and prof.settings["workers"] == 0
    assert all(prof.host_probe[k]["python_ms"] > 0 for k in ("before", "after"))  # the host's speed around it
    assert doc["facts"]["host.python_ms"] > 0
    # bounded: 4 steps of a 6-step epoch; no validation afterwards (results.csv has no val metrics), and no
    # checkpoint, which nothing reads: the process ends at the training's end
    assert not (tmp_path / "ul" / "run" / "weights" / "last.pt").exists()
    ph = prof.summary["phases"]
    assert list(ph) == ["start", "imports", "model", "trainer", "setup", "first_batch", "steps", "end", "total",
                        "training", "pauses"]
    assert abs(sum(v for k, v in ph.items() if k not in ("total", "training", "pauses")) - ph["total"]) < 0.01
    assert ph["pauses"] == 0 and ph["training"] == ph["steps"]  # a bounded run stays inside its first epoch
    ev = list(read_events(out / "events.jsonl"))
    after = ev[-1]["t"] - max(e["t1"] for e in ev if e["type"] == "step")  # the trace's export, the loader's timing
    assert ev[-1]["type"] == "run_end" and ph["end"] < after + 1.0  # and then no teardown: the process ends there
    head, row = (tmp_path / "ul" / "run" / "results.csv").read_text().splitlines()
    values = dict(zip(head.split(","), row.split(","), strict=True))
    assert float(values["train/box_loss"]) > 0
    assert all(float(values[k]) == 0 for k in values if k.startswith("val/"))  # a real validation has a val loss
    steps = [e for e in read_events(out / "events.jsonl") if e["type"] == "step"]
    assert [s["step"] for s in steps] == [0, 1, 2, 3]
    assert all(s["compute"] > 0 and s["images"] == 4 and s["loss"] is not None for s in steps)
    end = next(e for e in read_events(out / "events.jsonl") if e["type"] == "train_end")
    assert "grad_scale" in end and end["grad_scale"] is None  # no AMP on a CPU: no GradScaler to read
    samples = [e for e in read_events(out / "samples.jsonl") if e["type"] == "sample"]
    assert samples and samples[0]["gpu"] is None
    # --out never overwrites
    p = yd("profile", *train_args(dataset, tmp_path), "--out", out, cwd=tmp_path)
    assert p.returncode == 2 and "already exists" in p.stderr


def test_crash_is_recorded_incomplete(dataset, tmp_path):
    out = tmp_path / "crash"
    broken = tmp_path / "broken.yaml"  # a model configuration that is there, and that Ultralytics cannot build
    broken.write_text("nc: 2\nbackbone:\n  - [-1, 1, NoSuchLayer, [16]]\nhead: []\n")
    p = yd("profile", *train_args(dataset, tmp_path), f"model={broken}", "--out", out, cwd=tmp_path)
    assert p.returncode == 1 and "Traceback" not in p.stdout
    prof = record.load(out)
    assert prof.status == "incomplete" and prof.reason.startswith("crashed")


def test_missing_data_is_exit_2(tmp_path):
    p = yd("profile", "data=/nope/data.yaml", cwd=tmp_path)
    assert p.returncode == 2 and "not found" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.parametrize("sig,reason,code", [(signal.SIGINT, "interrupted", 130), (signal.SIGTERM, "terminated", 143)])
def test_signal_leaves_incomplete_profile(dataset, tmp_path, sig, reason, code):
    out = tmp_path / "sig"
    args = [f"data={dataset}", "imgsz=64", "batch=4", "epochs=50", "plots=False", f"project={tmp_path / 'ul'}"]
    proc = subprocess.Popen([sys.executable, "-m", "yolodoctor", "profile", *args, "--all", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            env={**os.environ, "YOLO_OFFLINE": "1"})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if any(e["type"] == "step" for e in read_events(out / "events.jsonl")):
            break
        time.sleep(0.2)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err[-2000:]
    prof = record.load(out)
    assert prof.status == "incomplete" and prof.reason == reason and prof.summary["steps"] >= 1


def test_trace_window_and_loader_capacity_on_cpu(dataset, tmp_path):
    out = tmp_path / "traced"
    args = [f"data={dataset}", "imgsz=64", "batch=4", "epochs=3", "plots=False", f"project={tmp_path / 'ul'}"]
    p = yd("profile", *args, "--steps", "16", "--loader-seconds", "1.5", "--out", out, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    # nothing of the profiler's own log (kineto's USDT profiler_start/stop lines) on the terminal, nor in the
    # training's output kept in the run directory; the training's (quiet) output is not shown without --debug
    for text in (p.stderr, (out / "output.log").read_text()):
        assert "USDT" not in text and "profiler_start" not in text and "SyncActivityProfilerHandler" not in text
    # 16 steps hold no steady window: its rate is not shown as a steady one, and the verdict says so
    rows = [line.split("  ")[0] for line in p.stdout.splitlines()]
    assert "steady rate" not in rows and "rate (not steady)" in rows and "Verdict:" in p.stdout
    assert "Not a steady figure" in p.stdout
    prof = record.load(out)
    assert prof.trace["first_step"] == 11 and prof.trace["steps"] == 5  # the last five of 16 steps
    assert prof.trace["summary"]["cpu_ops_per_step"] > 100 and prof.trace["summary"]["cuda"] is False
    assert (out / prof.files["trace"]).stat().st_size > 1000
    import gzip

    assert json.loads(gzip.decompress((out / "trace.json.gz").read_bytes()))["traceEvents"]
    traced = [e["step"] for e in read_events(out / "events.jsonl") if e["type"] == "step" and e.get("traced")]
    assert traced == [11, 12, 13, 14, 15]
    # the recorder times itself: a few tens of microseconds per step on this CPU, far below a step
    us = prof.summary["recorder_us_per_step"]
    assert 0 < us < 0.02 * 1e6 * prof.summary["step_s_median"], us
    cap = prof.loader_capacity
    assert cap["images_per_s"] > 0 and cap["batches"] > 2 and cap["workers"] == 0


SCHEDULE = ("epochs", "batch", "imgsz", "accumulate", "nbs", "warmup_iterations", "close_mosaic", "mosaic",
            "optimizer", "lr0", "workers", "batches_per_epoch", "images_per_epoch", "amp", "cache")


@pytest.mark.timed  # its window must be steady: runs alone, on the timed tests' pytest-xdist worker
@pytest.mark.xdist_group("timed")
def test_a_bounded_profile_measures_past_a_short_trainings_end_in_the_users_own_schedule(dataset, tmp_path):
    # the whole training: 3 epochs of 6 batches (18 steps); a bounded profile of 30 steps runs on past its end without
    # raising the epochs, so warm-up (2 of 3 epochs), mosaic, the optimizer and its lr are the user's run's
    args = [f"data={dataset}", "imgsz=64", "batch=4", "epochs=3", "close_mosaic=2", "plots=False",
            f"project={tmp_path / 'ul'}"]
    whole = yd("profile", *args, "name=whole", "--all", "--loader-seconds", "0", "--no-trace", "--out",
               tmp_path / "whole", "--json", cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr[-2000:]
    bounded = yd("profile", *args, "name=bounded", "--steps", "30", "--loader-seconds", "0", "--no-trace", "--out",
                 tmp_path / "bounded", "--json", cwd=tmp_path)
    assert bounded.returncode == 0, bounded.stderr[-2000:]
    w, b = record.load(tmp_path / "whole"), record.load(tmp_path / "bounded")
    assert w.summary["steps"] == 18 and b.summary["steps"] == 30 and b.summary["bounded"]
    assert {k: b.settings[k] for k in SCHEDULE} == {k: w.settings[k] for k in SCHEDULE}
    assert w.settings["warmup_iterations"] == 12 and w.settings["mosaic"] is True  # the phase the settings name
    steps = [e for e in read_events(tmp_path / "bounded" / "events.jsonl") if e["type"] == "step"]
    assert {s["epoch"] for s in steps} == {0}  # one measured epoch: no validation or epoch end inside the window
    assert [s["n"] for s in steps if s.get("wrapped")] == list(range(6, 30))
    assert all(s["images"] == 4 for s in steps)  # 24 images: full batches only
    assert b.summary["window"]["valid"] and w.summary["window"]["valid"] is False  # 18 steps: no 10-step window
