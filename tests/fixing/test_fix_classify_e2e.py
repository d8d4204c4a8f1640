"""A classification training (`data=FOLDER`, a -cls model) end to end on the CPU: large PNGs decoded in the training
process, as the detection case in test_fix_e2e.py. check measures the decode and the full-resolution RAM cache,
profile finds the step waiting for data, DL204 proposes cache='ram', fix --verify keeps it and --apply retrains with
it; diagnose and compare read its run directories."""

import json
import os
import subprocess
import sys

import pytest

# judges measured gains: runs alone (timed), on the timed tests' pytest-xdist worker
pytestmark = [pytest.mark.slow, pytest.mark.timed, pytest.mark.timeout(600), pytest.mark.xdist_group("timed")]


def yd(*words, timeout=600):
    env = {**os.environ, "YOLO_OFFLINE": "1"}
    p = subprocess.run([sys.executable, "-m", "yolodoctor", *map(str, words)], capture_output=True, text=True,
                       env=env, timeout=timeout)
    return p


def test_a_decode_bound_classification_training_gets_the_cache_planned_kept_and_applied(tmp_path):
    from yolodoctor.datasets.synth import make_classify_dataset

    data = tmp_path / "cls"
    make_classify_dataset(data, images=64, val_images=3, image_format="png", width=960, height=720)
    run = tmp_path / "runs" / "prof"
    p = yd("profile", f"data={data}", "model=yolo11n-cls.yaml", "imgsz=64", "batch=8", "epochs=5", "plots=False",
           f"project={tmp_path / 'ul'}", "--loader-seconds", "0", "--out", run, "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    prof = json.loads(p.stdout)
    settings = json.loads((run / "profile.json").read_text())["settings"]
    assert settings["task"] == "classify" and settings["mosaic"] is False and settings["cache"] is None
    assert "DL204" in [f["id"] for f in prof["findings"]]  # decode-bound, the full-resolution cache fits
    # a one-minute training cannot repay its trials: the budget is raised, as a user who wants the measurement does
    p = yd("fix", run, "--verify", "--apply", "--max-reps", "2", "--budget", "100000", "--json", timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads(p.stdout)
    v = {x["candidate"]: x for x in doc["trials"]["verdicts"]}
    assert v["cache=ram"]["kept"] and v["cache=ram"]["gain"] > 0.5, v
    a = doc["applied"]
    assert a["status"] == "complete" and not a["rolled_back"] and a["changes"][0]["after"] == "ram"
    applied = tmp_path / "runs" / a["run_dir"].split("/")[-1]
    rec = json.loads((applied / "profile.json").read_text())
    assert rec["args"]["cache"] == "ram" and rec["settings"]["cache"] == "ram"  # ClassificationDataset.cache_ram
    assert a["speedups"]["steps"]["ratio"] > 1.5
    d = yd("diagnose", applied, "--json")
    assert d.returncode == 0 and json.loads(d.stdout)["verdict"]["bound"] in ("cpu", "input"), d.stderr[-1000:]
    c = yd("compare", run, applied, "--json")
    assert c.returncode == 0, c.stderr[-1000:]
    changed = json.dumps(json.loads(c.stdout))
    assert '"cache"' in changed and "ram" in changed
