"""The command-line contract: exit codes, pure --json on stdout, one-line errors."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "datasets"


def yd(*args, timeout=120, env=None):
    p = subprocess.run([sys.executable, "-m", "yolodoctor", *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, cwd=ROOT, env={**os.environ, "YOLO_OFFLINE": "1", **(env or {})})
    return p.returncode, p.stdout, p.stderr


def assert_one_line_error(err):
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("yolodoctor: error:"), err


def test_import_is_light():
    code = "import sys, yolodoctor, yolodoctor.cli, yolodoctor.findings, yolodoctor.presentation.report; " \
           "print(sorted(m for m in ('torch', 'ultralytics', 'cv2', 'textual') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("args,needle", [
    (["check", "bach=3"], "did you mean batch"),
    (["check", "batch=abc"], "batch"),
    (["check", "imgsz=abc"], "imgsz=abc"),
    (["check", "data=/nonexistent/data.yaml"], "not found"),
    (["check", "--fail-on", "fatal"], "fail-on"),
    (["check", "--", "python", "train.py"], "takes no"),
    (["check", "--torch-flag", "cudnn.fast=true"], "--torch-flag"),
    (["nosuchcommand"], "No such command"),
    (["make-dataset", "/tmp/x", "--size", "12x3"], "--size"),
    (["make-dataset", "/tmp/x", "--seed", "-1"], "--seed"),
    (["diagnose", "pyproject.toml"], "pyproject.toml is a file, not a run directory"),
    (["profile", f"data={FIXTURES / 'ok-detect' / 'data.yaml'}", "model=nothere.pt", "--steps", "2"],
     "offline nothing can be downloaded"),
    (["profile", f"data={FIXTURES / 'ok-detect' / 'data.yaml'}", "--out", "pyproject.toml/run", "--steps", "2"],
     "pyproject.toml is a file, not a folder"),
    # no data=: Ultralytics would train on its own sample dataset (and offline fail as a crashed training)
    (["profile", "model=yolo11n.yaml", "--steps", "2"], "give data=DATA.yaml"),
    # a model file that is not there is an input error whatever its suffix (a .yaml was a crashed training, exit 1)
    (["profile", f"data={FIXTURES / 'ok-detect' / 'data.yaml'}", "model=/tmp/nosuch.yaml"], "model=/tmp/nosuch.yaml"),
    (["profile", f"data={FIXTURES / 'ok-detect' / 'data.yaml'}", "model=nosuch-n.yaml"], "no such file"),
    (["make-dataset", "/tmp/x", "--size", "100000x100000"], "from 32 to 8192"),
    (["profile", "--loader-seconds", "nan"], "not a finite number"),
    (["profile", "--sample-hz", "inf"], "--sample-hz"),
])
def test_usage_errors_exit_2_with_one_line(args, needle):
    rc, out, err = yd(*args)
    assert rc == 2, (out, err)
    assert needle in err
    assert_one_line_error(err)
    assert out == ""


def test_check_json_is_pure_and_follows_contract():
    rc, out, err = yd("check", "model=yolo11n.yaml", "--json")
    assert rc == 0, err
    doc = json.loads(out)  # nothing but JSON on stdout
    assert doc["schema"] == 1 and doc["command"] == "check" and doc["run_dir"] is None
    assert isinstance(doc["facts"], dict) and doc["facts"]["env.torch"]
    for f in doc["findings"]:
        assert set(f) == {"id", "name", "category", "severity", "message", "evidence", "fix"}
        if f["fix"]:
            assert {"args", "env", "torch_flags", "safety", "changes_training", "seconds_saved_per_epoch",
                    "one_off_seconds"} <= set(f["fix"])


def test_fail_on_threshold():
    # on this CPU machine the environment yields an info finding (no GPU): --fail-on info turns it into exit 1
    rc, out, _ = yd("check", "--json", "--fail-on", "info")
    assert rc == 1 and json.loads(out)["findings"]
    assert yd("check", "--json")[0] == 0


def test_help_and_version():
    rc, out, _ = yd("--help")
    assert rc == 0 and "check" in out and "make-dataset" in out
    rc, out, _ = yd("--version")
    assert rc == 0 and "yolodoctor" in out


def test_no_command_shows_the_commands():
    # nothing ran (exit 2), and the help reads as --help prints it, one command per line
    rc, out, err = yd()
    assert rc == 2 and err == ""
    assert any(line.split()[:1] == ["check"] for line in out.splitlines()), out


def test_a_place_a_dataset_cannot_go_is_one_line_for_make_dataset_and_demo(tmp_path):
    (tmp_path / "file").write_text("keep")
    rc, out, err = yd("make-dataset", tmp_path / "ds", "--images", "2", "--size", "64x48")
    assert rc == 0 and err == "", err
    rc, out, err = yd("make-dataset", tmp_path / "ds", "--images", "2", "--size", "64x48")
    assert rc == 2 and "pass --force" in err
    assert_one_line_error(err)
    # demo says what it is about to write, then why it cannot (was an internal error)
    rc, out, err = yd("demo", "--dir", tmp_path / "file", "--json")
    assert rc == 2 and out == "" and "Traceback" not in err and "internal error" not in err
    assert err.splitlines()[-1].startswith("yolodoctor: error:") and "not a directory" in err
    assert (tmp_path / "file").read_text() == "keep"


def test_diagnose_says_how_a_saved_run_ended(tmp_path):
    # diagnose re-runs the diagnosis of a saved run: a crashed one is a finding there too, as profile said (exit 1)
    import shutil

    run = tmp_path / "crashed"
    shutil.copytree(ROOT / "fixtures" / "profiles" / "h200-defaults", run)
    prof = json.loads((run / "profile.json").read_text())
    prof.update(status="incomplete", reason="crashed: RuntimeError: CUDA error: an illegal memory access", exit_code=1)
    (run / "profile.json").write_text(json.dumps(prof))
    rc, out, err = yd("diagnose", run, "--json")
    assert rc == 1, err
    assert "ST204" in {f["id"] for f in json.loads(out)["findings"]}
    rc, out, err = yd("diagnose", ROOT / "fixtures" / "profiles" / "h200-defaults", "--json")
    assert "ST204" not in {f["id"] for f in json.loads(out)["findings"]}


@pytest.mark.parametrize("yaml_text,needle", [
    ("train: images/train\nval: images/val\nnc: 5\nnames: [a, b, c]\n", "nc"),  # DS004
    ("train: images/train\nval: images/val\nnames: {0: a, 5: b}\n", "names"),  # DS003
])
def test_profile_refuses_a_data_yaml_ultralytics_refuses(tmp_path, yaml_text, needle):
    # before any training (was exit 1 with a crashed run directory left behind)
    rc, _, err = yd("make-dataset", tmp_path / "ds", "--images", "2", "--size", "64x48")
    assert rc == 0, err
    (tmp_path / "ds" / "bad.yaml").write_text(f"path: {tmp_path / 'ds'}\n" + yaml_text)
    rc, out, err = yd("profile", f"data={tmp_path / 'ds' / 'bad.yaml'}", "imgsz=64", "--steps", "2",
                      "--out", tmp_path / "run", "--json")
    assert rc == 2 and out == "" and needle in err and not (tmp_path / "run").exists()
    assert_one_line_error(err)


def test_check_without_data_says_no_dataset_was_examined():
    rc, out, err = yd("check", "--json")
    assert rc == 0, err
    f = next(f for f in json.loads(out)["findings"] if f["id"] == "DS011")
    assert f["severity"] == "info" and "coco8.yaml" in f["message"]
