"""`yolodoctor demo`: a planted bottleneck that the profile finds, a plan for it verified by fix --verify's own trials,
and what to run next."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from yolodoctor.commands import demo
from yolodoctor.findings import Finding, Fix, Severity
from yolodoctor.fixing.candidates import candidates
from yolodoctor.fixing.planner import Change, Plan

ROOT = Path(__file__).resolve().parents[2]


def test_the_demo_trials_the_top_findings_change_alone():
    plan = Plan(changes=[Change("args", "cache", None, "ram", "DL204 expensive-decode"),
                         Change("args", "deterministic", True, False, "CF201 deterministic-cost")])
    cands = candidates(plan)
    assert len(cands) > 2  # baseline, each change, the plan whole
    top = Finding("DL204", "expensive-decode", "io", Severity.warning, "m", fix=Fix(args={"cache": "ram"},
                                                                                   seconds_saved_per_epoch=2.0))
    other = Finding("CF201", "deterministic-cost", "config", Severity.info, "m", fix=Fix(args={"deterministic": False}))
    assert [c.name for c in demo.demo_candidates(cands, [other, top])] == ["baseline", "cache=ram"]
    assert demo.demo_candidates(cands, [Finding("DL202", "x", "dataloader", Severity.warning, "m")]) == []


def test_an_older_demo_dataset_is_made_again(tmp_path):
    marker = {"complete": True, "seed": 0, "counts": {"train": 64, "val": 4},
              "options": {"task": "detect", "image_format": "png", "width": 1280, "height": 960}}
    (tmp_path / "data.yaml").write_text("x")
    (tmp_path / ".yolodoctor-dataset").write_text(json.dumps(marker))
    assert demo._matches(tmp_path)
    marker["options"]["image_format"] = "jpg"  # the demo dataset of an earlier version: small JPEGs
    (tmp_path / ".yolodoctor-dataset").write_text(json.dumps(marker))
    assert not demo._matches(tmp_path)


@pytest.mark.slow
@pytest.mark.timed  # judges a measured speed-up: runs alone, on the timed tests' pytest-xdist worker
@pytest.mark.xdist_group("timed")
def test_the_demo_finds_its_planted_bottleneck_and_measures_the_fix(tmp_path):
    p = subprocess.run([sys.executable, "-m", "yolodoctor", "demo", "--dir", str(tmp_path / "demo-data"), "--json"],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path,
                       env={**os.environ, "YOLO_OFFLINE": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads(p.stdout)  # nothing but JSON on stdout
    # the profile finds the step waiting for the PNG decoding, and the plan caches the decoded images
    assert doc["verdict"]["bound"] == "input" and doc["verdict"]["share"] > 0.3
    assert "DL204" in {f["id"] for f in doc["findings"]}
    assert doc["plan"]["args"] == {"cache": "ram"}
    # fix --verify's trials: two repeats each of the baseline and cache='ram', and a measured gain
    runs = doc["trials"]["runs"]
    assert sorted(r["candidate"] for r in runs) == ["baseline", "baseline", "cache=ram", "cache=ram"]
    assert all(r["status"] == "complete" for r in runs)
    assert doc["speedups"]["cache=ram"]["factor"] > 1.3, doc["speedups"]
    # nothing of the trainings' own output, nor of the profiler's, reached the terminal
    assert "Caching images" not in p.stderr and "USDT" not in p.stderr and "profiler_start" not in p.stderr
    assert doc["seconds"] < 300  # about 60-90 s on 2 cores; the bound leaves room for a busy machine
