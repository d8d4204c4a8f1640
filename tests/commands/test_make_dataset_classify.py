"""`yolodoctor make-dataset DIR --task classify`: class folders, no data.yaml, a folder `check` passes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def yd(*args):
    p = subprocess.run([sys.executable, "-m", "yolodoctor", *map(str, args)], capture_output=True, text=True,
                       timeout=180, cwd=ROOT, env={**os.environ, "YOLO_OFFLINE": "1"})
    return p.returncode, p.stdout, p.stderr


def test_writes_class_folders_and_check_passes_them(tmp_path):
    out = tmp_path / "cls"
    rc, stdout, err = yd("make-dataset", out, "--task", "classify", "--images", "12", "--val-images", "6",
                         "--size", "64x64", "--classes", "3", "--format", "png", "--seed", "5", "--json")
    assert rc == 0, err
    d = json.loads(stdout)["dataset"]
    assert d["task"] == "classify" and d["root"] == str(out.resolve()) and "yaml_path" not in d
    assert (d["train_images"], d["val_images"], d["names"]) == (12, 6, ["disc", "box", "star"])
    assert not (out / "data.yaml").exists()
    assert sorted(p.relative_to(out).as_posix() for p in (out / "val").rglob("*.png")) == [
        "val/box/000001.png", "val/box/000004.png", "val/disc/000000.png", "val/disc/000003.png",
        "val/star/000002.png", "val/star/000005.png"]
    rc, stdout, err = yd("check", f"data={out}", "model=yolo11n-cls.yaml", "--json", "--warm")
    assert rc == 0, err
    doc = json.loads(stdout)
    assert doc["facts"]["dataset.task"] == "classify" and doc["facts"]["dataset.images.train"] == 12
    assert not [f for f in doc["findings"] if f["severity"] != "info"]


def test_the_text_output_says_how_to_check_it(tmp_path):
    rc, stdout, err = yd("make-dataset", tmp_path / "cls", "--task", "classify", "--images", "3", "--size", "32x32")
    assert rc == 0, err
    assert "classification folder" in stdout and "model=yolo11n-cls.yaml" in stdout and "data.yaml" not in stdout


@pytest.mark.parametrize("args,why", [
    (["--classes", "0"], "--classes"),
    (["--size", "8x8"], "--size"),
])
def test_bad_options_are_usage_errors(tmp_path, args, why):
    rc, _, err = yd("make-dataset", tmp_path / "cls", "--task", "classify", *args)
    assert rc == 2 and why in err and "Traceback" not in err


def test_refuses_a_foreign_folder(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.txt").write_text("precious")
    rc, _, err = yd("make-dataset", tmp_path / "mine", "--task", "classify", "--images", "2", "--force")
    assert rc == 2 and "not made by yolodoctor" in err
