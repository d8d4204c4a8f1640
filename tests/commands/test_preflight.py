"""What `profile` refuses before it starts a training: a Python without Ultralytics, no data=, a missing model."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from yolodoctor.commands import preflight
from yolodoctor.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "datasets"


@pytest.fixture
def bare_python(tmp_path, monkeypatch):
    """A folder first on PATH whose `python` is the interpreter this venv was made from, run outside the venv: it
    has no Ultralytics (as a system python or another environment's)."""
    base = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    probe = subprocess.run([str(base), "-c", preflight.FINDS_ULTRALYTICS], capture_output=True)
    if probe.returncode == 0:
        pytest.skip(f"{base} imports ultralytics itself: no Python without it here")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(base)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir / "python"


def test_a_python_without_ultralytics_is_refused_naming_it(bare_python):
    with pytest.raises(UsageError) as e:
        preflight.check_interpreter(["python", "train.py"])
    msg = str(e.value)
    assert msg.startswith(f"{bare_python} cannot import ultralytics") and "\n" not in msg


def test_this_python_passes(tmp_path):
    preflight.check_interpreter([sys.executable, "train.py"])  # no error


def test_the_python_of_a_scripts_shebang_is_the_one_checked(tmp_path, bare_python):
    script = tmp_path / "train-script"
    script.write_text("#!/usr/bin/env python\nprint('hi')\n")
    script.chmod(0o755)
    assert preflight.interpreter_of([str(script)]) == (str(script), str(bare_python))
    with pytest.raises(UsageError, match="the Python that runs"):
        preflight.check_interpreter([str(script)])
    mine = tmp_path / "mine"
    mine.write_text(f"#!{sys.executable}\n")
    mine.chmod(0o755)
    assert preflight.interpreter_of([str(mine)]) == (str(mine), sys.executable)
    preflight.check_interpreter([str(mine)])


def test_a_program_that_is_not_python_is_left_alone_and_a_missing_one_refused(tmp_path):
    sh = tmp_path / "run.sh"
    sh.write_text("#!/bin/sh\nexec python train.py\n")
    sh.chmod(0o755)
    assert preflight.interpreter_of([str(sh)]) == (str(sh), None)
    preflight.check_interpreter([str(sh)])
    with pytest.raises(UsageError, match="command not found"):
        preflight.check_interpreter(["no-such-program-here", "x"])


def test_profile_of_a_script_under_a_python_without_ultralytics_exits_2_in_one_line(bare_python, tmp_path):
    p = subprocess.run([sys.executable, "-m", "yolodoctor", "profile", "--out", str(tmp_path / "run"), "--", "python",
                        "train.py"], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                       env={**os.environ, "YOLO_OFFLINE": "1"})
    assert p.returncode == 2 and p.stdout == ""
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("yolodoctor: error:") and "cannot import ultralytics" in lines[0]
    assert not (tmp_path / "run").exists()  # refused before any run directory


def test_no_data_is_a_usage_error_saying_what_ultralytics_would_do():
    with pytest.raises(UsageError, match=r"coco8\.yaml"):
        preflight.require_data({"model": "yolo11n.yaml"})
    preflight.require_data({"data": "coco8.yaml"})  # asked for by name: fine


@pytest.mark.parametrize("model,missing", [
    ("/tmp/nosuch.yaml", True),
    ("nosuch-model.yml", True),
    ("yolo11n.yaml", False),  # Ultralytics' configuration yolo11.yaml at scale n
    ("yolov8s.yaml", False),
    ("yolo11n-seg.yaml", False),
    (str(FIXTURES / "ok-detect" / "data.yaml"), False),  # a file that is there (whatever it holds)
    ("https://example.com/m.pt", False),  # left to Ultralytics
])
def test_a_missing_model_configuration_is_found_before_training(model, missing):
    why = preflight.missing_model(model, offline=True)
    assert (why is not None) is missing, why
    if missing:
        assert why.startswith(f"model={model}: no such file")


def test_missing_weights_online_are_refused_unless_ultralytics_can_download_them():
    assert "not one of the weights" in preflight.missing_model("nosuch-weights.pt", offline=False)
    assert preflight.missing_model("yolo11n.pt", offline=False) is None  # a release asset: downloaded
    assert preflight.missing_model("nosuch-weights.pt", offline=True) is None  # offline: check's own refusal says it
