"""Whole trainings on the CPU, in every mode that records one whole: their steady figures come from their training
steps, the validation between epochs is a fact of its own, and the window invariants hold on what was recorded."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from yolodoctor.diagnosis.diagnose import diagnose
from yolodoctor.diagnosis.invariants import window_violations
from yolodoctor.record import profile as record
from yolodoctor.record.events import read_events

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "fixtures" / "scripts"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    from yolodoctor.datasets.synth import make_dataset

    # 48 images at batch 4: 12 steps an epoch, so that three epochs outlast the first 20 settling steps
    return Path(make_dataset(tmp_path_factory.mktemp("ds") / "ds", images=48, val_images=8, width=160, height=120,
                             workers=1).yaml_path)


def run(cmd, cwd, **env):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600, cwd=cwd,
                          env={**os.environ, "YOLO_OFFLINE": "1", "PYTHONPATH": str(ROOT), **env})


def yd(*args, cwd):
    return run([sys.executable, "-m", "yolodoctor", *args], cwd)


def holds(out: Path, epochs: int):
    """The run's record: its window holds training steps only, and the validation pauses are counted apart."""
    prof = record.load(out)
    assert prof.status == "complete", prof.reason
    events = list(read_events(out / "events.jsonl"))
    assert window_violations(prof.summary, events, prof.ranks) == []
    s = prof.summary
    main = [e for e in events if e["type"] == "step" and e.get("train_index", 0) == s.get("train_index", 0)]
    assert {e["epoch"] for e in main} == set(range(epochs))
    assert s["pauses"]["epoch_ends"] == epochs - 1 and s["pauses"]["seconds"] > 0
    assert s["training_s"] + s["pauses"]["seconds"] == pytest.approx(s["seconds"], rel=0.02)
    w = s["window"]
    if w["valid"]:  # no stretch crosses an epoch: each one's steps share it
        by_n = {e["n"]: e for e in main}
        assert all(by_n[a]["epoch"] == by_n[b]["epoch"] for a, b in w["stretches"])
    d = diagnose(out)
    assert d.facts["run.pauses"] == epochs - 1 and 0 < d.facts["run.pause_share"] < 1
    return prof, d


@pytest.mark.timed  # its window must be steady: runs alone, on the timed tests' pytest-xdist worker
@pytest.mark.xdist_group("timed")
def test_a_whole_three_epoch_profile_takes_its_rate_from_its_steps(dataset, tmp_path):
    out = tmp_path / "all"
    p = yd("profile", f"data={dataset}", "imgsz=64", "batch=4", "epochs=3", "workers=0", "plots=False",
           f"project={tmp_path / 'ul'}", "name=run", "--all", "--loader-seconds", "0", "--out", out, cwd=tmp_path)
    assert p.returncode in (0, 1), p.stderr[-2000:]
    prof, d = holds(out, 3)
    assert prof.summary["window"]["valid"] and len(prof.summary["window"]["stretches"]) >= 2
    ph = prof.summary["phases"]
    assert ph["training"] + ph["pauses"] == pytest.approx(ph["steps"], abs=0.01) and ph["pauses"] > 0
    assert d.facts["run.val_s"] > 0


def test_a_script_that_trains_three_epochs_whole(dataset, tmp_path):
    out = tmp_path / "script"
    p = yd("profile", "--all", "--loader-seconds", "0", "--out", out, "--", sys.executable,
           SCRIPTS / "train_plain.py", dataset, tmp_path / "ul", 3, cwd=tmp_path)
    assert p.returncode in (0, 1), p.stderr[-2000:]
    holds(out, 3)


def test_a_script_that_trains_twice_keeps_each_call_to_its_own_window(dataset, tmp_path):
    out = tmp_path / "twice"
    p = yd("profile", "--all", "--loader-seconds", "0", "--out", out, "--", sys.executable,
           SCRIPTS / "train_twice_custom.py", dataset, tmp_path / "ul", cwd=tmp_path)
    assert p.returncode in (0, 1), p.stderr[-2000:]
    prof = record.load(out)
    per = prof.summary["per_train"]
    assert [t["train_index"] for t in per] == [0, 1]
    events = list(read_events(out / "events.jsonl"))
    for t in per:  # every call's window holds steps of that call only
        assert window_violations(t, events) == []
    first = {e["n"] for e in events if e["type"] == "step" and e["train_index"] == 0}
    spans = [tuple(x) for t in per for x in t["window"]["spans"]]
    assert len(spans) == len(set(spans))  # no span shared between the calls
    assert prof.summary["pauses"]["count"] == 0 and first


def test_attach_records_a_whole_training(dataset, tmp_path):
    out = tmp_path / "nb"
    p = run([sys.executable, SCRIPTS / "attach_notebook.py", dataset, tmp_path / "ul", out, "all", 3], tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    prof, _ = holds(out, 3)
    assert prof.mode == "attach"


def test_a_training_shorter_than_a_bounded_profile_is_measured_whole_in_its_own_time(dataset, tmp_path):
    # two epochs of 12 steps: fewer than a bounded profile's 35; measured as the training runs (no wrapping past its
    # end), its loader not timed for 8 s after a training of a few seconds
    out = tmp_path / "short"
    p = yd("profile", f"data={dataset}", "imgsz=64", "batch=4", "epochs=2", "workers=0", "plots=False",
           f"project={tmp_path / 'ul'}", "name=run", "--out", out, cwd=tmp_path)
    assert p.returncode in (0, 1), p.stderr[-2000:]
    prof, _ = holds(out, 2)
    assert prof.summary["bounded"] is False and prof.summary["steps"] == 24
    assert "skipped" in prof.loader_capacity and not any(
        e["type"] == "step" and e.get("wrapped") for e in read_events(out / "events.jsonl"))
    limit = next(e for e in read_events(out / "events.jsonl") if e["type"] == "steps_limit")
    assert limit["steps"] is None and limit["planned"] == 24 and "the whole training" in limit["rule"]
    assert "--steps" in p.stdout  # no steady window in 24 steps: the next command measures past the end
