"""`yolodoctor check` end to end on the fixture datasets: defects are findings (exit 1) naming the files; inputs
that cannot be read are exit 2; malformed data.yaml and label files never produce a traceback."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
DATASETS = ROOT / "fixtures" / "datasets"


def check(*args):
    p = subprocess.run([sys.executable, "-m", "yolodoctor", "check", *map(str, args), "--json", "--warm"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT, env={**os.environ, "YOLO_OFFLINE": "1"})
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("name,rule,file", [
    ("truncated-jpeg", "DS107", ".jpg"),
    ("labels-wrong-columns", "DS111", ".txt"),
    ("yaml-unparseable", "DS001", "data.yaml"),
])
def test_defective_dataset_exits_1_and_names_the_files(name, rule, file):
    rc, out, err = check(f"data={DATASETS / name / 'data.yaml'}")
    assert rc == 1, err
    doc = json.loads(out)
    hit = next(f for f in doc["findings"] if f["id"] == rule)
    assert hit["severity"] == "error" and file in json.dumps(hit["evidence"])


def test_clean_dataset_exits_0():
    rc, out, err = check(f"data={DATASETS / 'ok-detect' / 'data.yaml'}")
    assert rc == 0, err
    assert not [f for f in json.loads(out)["findings"] if f["severity"] == "error"]


def test_unreadable_inputs_exit_2(tmp_path):
    rc, out, err = check(f"data={tmp_path}")  # a folder without a yaml
    assert rc == 2 and out == "" and "Traceback" not in err
    locked = tmp_path / "locked.yaml"
    locked.write_text("train: a\nval: b\nnames: {0: x}\n")
    locked.chmod(0)
    rc, _, err = check(f"data={locked}")
    if os.geteuid() != 0:  # root reads anything; elsewhere this is an input that cannot be read
        assert rc == 2 and "Traceback" not in err
    else:
        assert rc in (1, 2) and "Traceback" not in err


YAML_TEXT = st.one_of(
    st.text(max_size=200),
    st.builds(lambda k, v: f"{k}: {v}\n", st.sampled_from(["train", "val", "names", "path", "nc", "kpt_shape"]),
              st.text(max_size=40)),
    st.lists(st.tuples(st.sampled_from(["train", "val", "names", "path", "nc", "download", "kpt_shape"]),
                       st.one_of(st.integers(), st.text(max_size=20), st.lists(st.integers(), max_size=3))),
             max_size=6).map(lambda kv: "".join(f"{k}: {json.dumps(v)}\n" for k, v in kv)),
)


@settings(max_examples=25, deadline=20000, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=YAML_TEXT, labels=st.binary(max_size=200))
def test_malformed_inputs_never_traceback(tmp_path, text, labels, capsys):
    """In process (no interpreter start per example): the CLI ends with a finding (0/1) or exit 2, nothing else."""
    from yolodoctor.cli import main

    root = tmp_path / "ds"
    (root / "images" / "train").mkdir(parents=True, exist_ok=True)
    (root / "labels" / "train").mkdir(parents=True, exist_ok=True)
    (root / "labels" / "train" / "a.txt").write_bytes(labels)
    (root / "images" / "train" / "a.jpg").write_bytes(b"\xff\xd8\xff" + labels)
    (root / "data.yaml").write_text(text)
    with pytest.raises(SystemExit) as e:
        main(["check", f"data={root / 'data.yaml'}", "--json", "--warm"])
    out, err = capsys.readouterr()
    assert e.value.code in (0, 1, 2), err
    assert "Traceback" not in err and "internal error" not in err
    if e.value.code in (0, 1):
        json.loads(out)


# ---------------------------------------------------------------------------------------------------------------------
# classification folders (data=FOLDER with a -cls model)


@pytest.fixture
def cls_folder(tmp_path):
    from yolodoctor.datasets.synth import make_classify_dataset

    return make_classify_dataset(tmp_path / "cls", images=12, width=64, height=64, workers=1).root


def test_clean_classification_folder_exits_0(cls_folder):
    rc, out, err = check(f"data={cls_folder}", "model=yolo11n-cls.yaml")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["facts"]["dataset.task"] == "classify" and doc["facts"]["dataset.classes"] == 3
    assert not [f for f in doc["findings"] if f["severity"] != "info"]


def test_broken_classification_folder_exits_1_and_names_the_files(cls_folder):
    bad = cls_folder / "train" / "disc" / "000000.jpg"
    bad.write_bytes(b"not an image\n")
    rc, out, err = check(f"data={cls_folder}", "task=classify")
    assert rc == 1, err
    hit = next(f for f in json.loads(out)["findings"] if f["id"] == "DS106")
    assert hit["severity"] == "error" and str(bad) in json.dumps(hit["evidence"])


def test_classification_folder_with_a_detection_model_is_exit_2(cls_folder):
    rc, out, err = check(f"data={cls_folder}", "model=yolo11n.yaml")
    assert rc == 2 and out == "" and "Traceback" not in err
    line = err.strip().splitlines()
    assert len(line) == 1 and "model=yolo11n-cls.yaml" in line[0] and "data.yaml" in line[0]


def test_missing_classification_folder_is_exit_2(tmp_path):
    rc, out, err = check(f"data={tmp_path / 'nowhere'}", "model=yolo11n-cls.yaml")
    assert rc == 2 and out == "" and "Traceback" not in err and len(err.strip().splitlines()) == 1
