"""Tests for yolodoctor.check.dataset on the fixture datasets in fixtures/datasets/ (see make_fixtures.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from yolodoctor.check import labels as L
from yolodoctor.check.dataset import DatasetCheck, DatasetIndex, check_dataset
from yolodoctor.check.datayaml import DATASET_KEY_TYPES, datasets_dir, resolve_root
from yolodoctor.errors import InputError
from yolodoctor.findings import Severity

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "fixtures" / "datasets"
TASK_OF = {  # fixtures whose task is not inferable from data.yaml (as with `yolo train task=...`)
    "ok-segment": "segment",
    "segment-box-rows": "segment",
    "segment-odd-coordinates": "segment",
    "ok-obb": "obb",
    "obb-box-rows": "obb",
}


def run(name: str, **kw) -> DatasetCheck:
    kw.setdefault("task", TASK_OF.get(name))
    return check_dataset(FIX / name / "data.yaml", **kw)


def by_id(res: DatasetCheck) -> dict:
    return {f.id: f for f in res.findings}


def errors(res: DatasetCheck) -> list:
    return [f for f in res.findings if f.severity == Severity.error]


# ---------------------------------------------------------------------------------------------------------------------
# one test per defect: id, severity, file and line in evidence

DEFECTS = [
    # fixture, finding id, file named in evidence, line (None for whole-file defects)
    ("labels-wrong-columns", "DS111", "labels/train/b.txt", 2),
    ("class-id-out-of-range", "DS113", "labels/train/b.txt", 2),
    ("coords-out-of-range", "DS114", "labels/train/b.txt", 1),
    ("zero-size-box", "DS115", "labels/train/b.txt", 2),
    ("duplicate-rows", "DS116", "labels/train/b.txt", 3),
    ("label-unparseable", "DS112", "labels/train/b.txt", 1),
    ("image-without-label", "DS101", "images/train/c.jpg", None),
    ("label-without-image", "DS102", "labels/train/ghost.txt", None),
    ("truncated-jpeg", "DS107", "images/train/b.jpg", None),
    ("corrupt-image", "DS106", "images/train/b.jpg", None),
    ("empty-image-file", "DS105", "images/train/b.jpg", None),
    ("image-too-small", "DS108", "images/train/b.jpg", None),
    ("segment-box-rows", "DS111", "labels/train/b.txt", 1),
    ("segment-odd-coordinates", "DS111", "labels/train/b.txt", 1),
    ("pose-wrong-keypoints", "DS111", "labels/train/b.txt", 1),
    ("obb-box-rows", "DS111", "labels/train/b.txt", 1),
]


@pytest.mark.parametrize(("fixture", "fid", "rel", "line"), DEFECTS, ids=[d[0] for d in DEFECTS])
def test_defect_fixture(fixture, fid, rel, line):
    res = run(fixture)
    f = by_id(res).get(fid)
    assert f is not None, [x.id for x in res.findings]
    assert f.severity == Severity.error
    assert f.category == "dataset"
    assert f.fix is not None and f.fix.note and f.fix.safety == "safe" and not f.fix.args
    ex = f.evidence["examples"]
    want = str(FIX / fixture / rel)
    hits = [e for e in ex if e["file"] == want]
    assert hits, ex
    if line is not None:
        assert any(e["line"] == line and e["row"] for e in hits), hits
        text = (FIX / fixture / rel).read_text().splitlines()[line - 1].strip()
        assert any(e["row"] == text for e in hits)
    json.dumps(f.to_dict())  # serialisable


def test_each_defect_counts_files_and_rows():
    f = by_id(run("labels-wrong-columns"))["DS111"]
    assert f.evidence["files"] == 1 and f.evidence["rows"] == 2
    assert [e["line"] for e in f.evidence["examples"]] == [2, 3]
    f = by_id(run("class-id-out-of-range"))["DS113"]
    assert f.evidence["rows"] == 2  # class 7 and the non-integer 1.5
    assert any("not an integer" in e["reason"] for e in f.evidence["examples"])


def test_segment_box_rows_cover_both_ultralytics_failures():
    f = by_id(run("segment-box-rows"))["DS111"]
    lines = {(Path(e["file"]).name, e["line"]) for e in f.evidence["examples"]}
    assert lines == {("b.txt", 1), ("c.txt", 2)}  # a boxes-only file and a mixed file


def test_empty_label_file_is_info_only():
    res = run("empty-label-file")
    f = by_id(res)["DS103"]
    assert f.severity == Severity.info
    assert not errors(res)
    assert res.facts["dataset.labels.empty"] == 1


def test_image_without_label_is_warning_when_rare(tmp_path):
    root = tmp_path / "ds"
    shutil.copytree(FIX / "ok-detect", root)
    for i in range(30):  # 30 more labelled images, one unlabelled: 1/34 < 10%
        shutil.copy(root / "images/train/a.jpg", root / f"images/train/x{i}.jpg")
        shutil.copy(root / "labels/train/a.txt", root / f"labels/train/x{i}.txt")
    (root / "labels/train/b.txt").unlink()
    f = by_id(check_dataset(root / "data.yaml"))["DS101"]
    assert f.severity == Severity.warning
    assert f.evidence["by_split"] == {"train": 1, "val": 0}


def test_split_overlap_warning():
    res = run("split-overlap")
    f = by_id(res)["DS109"]
    assert f.severity == Severity.warning
    assert f.evidence["examples"][0]["file"].endswith("images/train/a.jpg")
    assert not errors(res)


# ---------------------------------------------------------------------------------------------------------------------
# data.yaml


def test_yaml_unparseable():
    f = by_id(run("yaml-unparseable"))["DS001"]
    assert f.severity == Severity.error and f.evidence["line"] == 3


def test_yaml_missing_keys():
    res = run("yaml-missing-keys")
    f = by_id(res)["DS002"]
    assert f.severity == Severity.error
    assert "val" in f.message and "names" in f.message
    assert res.index is not None and res.index.names == {}


def test_yaml_names_nc_mismatch():
    f = by_id(run("yaml-names-nc-mismatch"))["DS004"]
    assert f.severity == Severity.error and f.evidence == {"names": 2, "nc": 3}


def test_yaml_path_missing():
    f = by_id(run("yaml-path-missing"))["DS005"]
    assert f.severity == Severity.error and f.evidence["path"].endswith("images/validation")


def test_missing_data_yaml_is_input_error(tmp_path):
    with pytest.raises(InputError, match="never downloads"):
        check_dataset(tmp_path / "nope.yaml")
    with pytest.raises(InputError):
        check_dataset("coco8.yaml")  # a bare Ultralytics dataset name would be downloaded; not by us


def test_directory_with_one_yaml_is_accepted():
    res = check_dataset(FIX / "ok-detect")
    assert res.index is not None and not errors(res)


@pytest.mark.parametrize(
    ("text", "fid"),
    [
        ("[1, 2, 3]\n", "DS001"),
        ("just a string\n", "DS001"),
        ("", "DS002"),
        ("train: images/train\nval: images/val\nnames: 5\n", "DS003"),
        ("train: 3\nval: images/val\nnames: [a]\n", "DS003"),
        ("train: images/train\nval: images/val\nnc: 1.5\n", "DS003"),
        ("train: images/train\nval: images/val\nnames: {0: a, 5: b}\n", "DS003"),
        ("train: images/train\nval: images/val\nnames: []\n", "DS003"),
        ("train: images/train\nval: images/val\nnames: [a]\nkpt_shape: [0, 4]\n", "DS008"),
        ("train: images/train\nval: images/val\nnames: [a]\nkpt_shape: [3, 3]\nflip_idx: [0, 1]\n", "DS008"),
        ("train: images/train\nval: images/val\nnames: [a]\ntest: nowhere\n", "DS005"),
        ("train: images/train\nval: empty\nnames: [a]\n", "DS007"),
    ],
)
def test_yaml_problems(tmp_path, text, fid):
    root = tmp_path / "ds"
    shutil.copytree(FIX / "ok-detect", root)
    (root / "empty").mkdir()
    (root / "data.yaml").write_text(text)
    res = check_dataset(root / "data.yaml")
    assert fid in by_id(res), [(f.id, f.message) for f in res.findings]
    if "test: nowhere" in text:
        assert by_id(res)["DS005"].severity == Severity.warning  # test split is not needed for training


def test_validation_key_is_accepted_as_val(tmp_path):
    root = tmp_path / "ds"
    shutil.copytree(FIX / "ok-detect", root)
    (root / "data.yaml").write_text("train: images/train\nvalidation: images/val\nnames: [cat, dog]\n")
    res = check_dataset(root / "data.yaml")
    assert not errors(res) and len(res.index.splits["val"]) == 2


def test_nc_without_names(tmp_path):
    root = tmp_path / "ds"
    shutil.copytree(FIX / "ok-detect", root)
    (root / "data.yaml").write_text("train: images/train\nval: images/val\nnc: '2'\n")
    res = check_dataset(root / "data.yaml")
    assert not errors(res) and res.index.names == {0: "class_0", 1: "class_1"}


def test_relative_path_key_resolves_like_ultralytics(tmp_path, monkeypatch):
    yaml_file = tmp_path / "cfg" / "data.yaml"
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path)
    problems: list = []
    assert resolve_root({"path": "here"}, yaml_file, problems) == (tmp_path / "here").resolve()  # cwd, not yaml dir
    assert problems[-1].kind == "cwd-path"
    assert resolve_root({"path": "elsewhere"}, yaml_file, problems) == (datasets_dir() / "elsewhere").resolve()
    assert resolve_root({}, yaml_file, problems) == yaml_file.parent
    assert resolve_root({"path": "/abs/x"}, yaml_file, problems) == Path("/abs/x")


def test_dotdot_split_fallback(tmp_path):
    root = tmp_path / "ds"
    shutil.copytree(FIX / "ok-detect", root)
    (root / "data.yaml").write_text("train: ../images/train\nval: images/val\nnames: [cat, dog]\n")
    res = check_dataset(root / "data.yaml")  # ../images/train does not exist, so Ultralytics drops the ../
    assert not errors(res) and len(res.index.splits["train"]) == 3


# ---------------------------------------------------------------------------------------------------------------------
# download: never executed


def test_download_field_is_never_executed(tmp_path):
    root = tmp_path / "ds"
    shutil.copytree(FIX / "yaml-with-download", root)
    marker = root / "DOWNLOAD_RAN"
    res = check_dataset(root / "data.yaml")
    assert not marker.exists()
    assert not (FIX / "yaml-with-download" / "DOWNLOAD_RAN").exists()
    ids = by_id(res)
    assert ids["DS006"].severity == Severity.info
    assert "download" in ids["DS005"].message  # the val path is missing: Ultralytics would run it now
    # positive control: the script really would create the marker, exactly as check_det_dataset execs it
    script = yaml.safe_load((root / "data.yaml").read_text())["download"]
    exec(script, {"yaml": {"path": root}})
    assert marker.exists()


def test_bash_download_is_never_run(tmp_path):
    root = tmp_path / "ds"
    shutil.copytree(FIX / "ok-detect", root)
    marker = tmp_path / "BASH_RAN"
    (root / "data.yaml").write_text(
        f"train: images/train\nval: images/missing\nnames: [a, b]\ndownload: bash -c 'touch {marker}'\n"
    )
    res = check_dataset(root / "data.yaml")
    assert not marker.exists() and "DS006" in by_id(res)


def test_check_does_not_import_ultralytics_or_torch():
    code = (
        "import sys; from yolodoctor.check.dataset import check_dataset; "
        f"r = check_dataset({str(FIX / 'ok-detect' / 'data.yaml')!r}); "
        "print([m for m in ('torch', 'ultralytics', 'cv2') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------------------------------------------------------------
# ok fixtures, tasks, facts, index


@pytest.mark.parametrize("fixture", ["ok-detect", "ok-segment", "ok-pose", "ok-obb", "txt-list-splits"])
def test_ok_fixtures_have_no_errors_or_warnings(fixture):
    res = run(fixture)
    assert [f.id for f in res.findings if f.severity >= Severity.warning] == []
    assert res.facts["dataset.images"] == 5
    assert res.facts["dataset.labels.missing"] == 0


def test_task_inference_and_rows():
    assert run("ok-pose").facts["dataset.task"] == "pose"
    assert run("ok-pose").facts["dataset.label_rows"] == {"pose": 6}
    assert run("ok-detect").facts["dataset.task"] == "detect"
    assert run("ok-segment").facts["dataset.label_rows"] == {"polygon": 6}
    assert run("ok-obb").facts["dataset.label_rows"] == {"polygon": 6}
    assert run("ok-pose").index.kpt_shape == (3, 3)


def test_detect_task_accepts_polygons_and_pose_rows():
    # Ultralytics turns polygon rows into boxes, and keeps the box of pose rows, when training detect
    assert not errors(run("ok-segment", task="detect"))
    res = run("ok-pose", task="detect")
    assert not errors(res) and res.facts["dataset.label_rows"] == {"box": 6}


def test_pose_rows_in_a_segment_run_are_wrong():
    assert "DS111" in by_id(run("ok-detect", task="segment"))
    assert "DS111" in by_id(run("ok-detect", task="obb"))


def test_txt_list_splits_index():
    res = run("txt-list-splits")
    idx = res.index
    assert isinstance(idx, DatasetIndex)
    assert [p.name for p in idx.splits["train"]] == ["a.png", "b.png", "c.png"]
    assert [p.name for p in idx.splits["val"]] == ["v1.jpg", "v2.jpg"]
    assert idx.label_paths("train")[0] == FIX / "txt-list-splits" / "labels" / "a.txt"
    assert res.facts["dataset.image_formats"] == {"png": 3, "jpg": 2}


def test_facts(tmp_path):
    res = run("ok-detect")
    f = res.facts
    for key in (
        "dataset.task", "dataset.images.train", "dataset.images.val", "dataset.labels.missing", "dataset.instances",
        "dataset.image_bytes_mean", "dataset.image_formats", "dataset.image_size_median", "dataset.classes",
    ):
        assert key in f, key
    assert f["dataset.images.train"] == 3 and f["dataset.images.val"] == 2
    assert f["dataset.instances"] == 6 and f["dataset.classes"] == 2
    assert f["dataset.image_size_median"] == [64, 48]
    assert f["dataset.image_formats"] == {"jpg": 5}
    assert f["dataset.image_bytes_mean"] > 0
    json.dumps(f)
    idx = res.index
    assert idx.root == FIX / "ok-detect" and idx.names == {0: "cat", 1: "dog"} and idx.task == "detect"
    assert idx.label_path(idx.splits["train"][0]) == FIX / "ok-detect" / "labels" / "train" / "a.txt"


def test_process_pool_matches_inline(tmp_path):
    root = tmp_path / "ds"
    shutil.copytree(FIX / "ok-detect", root)
    img = (root / "images/train/a.jpg").read_bytes()
    for i in range(600):
        (root / f"images/train/p{i:04d}.jpg").write_bytes(img)
        if i % 100 != 7:
            bad = "9 0.1 0.1 0.1 0.1\n" if i % 3 == 0 else ""
            (root / f"labels/train/p{i:04d}.txt").write_text("0 0.5 0.5 0.2 0.2\n" + bad)
    pooled = check_dataset(root / "data.yaml", workers=2)
    inline = check_dataset(root / "data.yaml", workers=1)
    assert pooled.facts["dataset.check_workers"] == 2 and inline.facts["dataset.check_workers"] == 1
    timing = ("dataset.check_workers", "dataset.check_seconds")

    def strip(r):
        return {k: v for k, v in r.facts.items() if k not in timing}

    assert strip(pooled) == strip(inline)
    assert [f.to_dict() for f in pooled.findings] == [f.to_dict() for f in inline.findings]
    assert by_id(pooled)["DS113"].evidence["files"] == sum(1 for i in range(600) if i % 3 == 0 and i % 100 != 7)
    ex = by_id(pooled)["DS113"].evidence["examples"]
    assert [Path(e["file"]).name for e in ex] == ["p0000.txt", "p0003.txt", "p0006.txt", "p0009.txt", "p0012.txt"]


# ---------------------------------------------------------------------------------------------------------------------
# agreement with the installed Ultralytics (imported inside the tests only, offline)


@pytest.fixture(scope="module")
def ultra():
    os.environ["YOLO_OFFLINE"] = "1"
    import ultralytics.data.utils as du
    import ultralytics.utils.patches as patches

    patches._pil_plugins_registered = True  # never let Image.open try to pip-install pi-heif
    return du


def test_constants_match_ultralytics(ultra):
    assert set(L.IMG_FORMATS) == set(ultra.IMG_FORMATS)
    assert DATASET_KEY_TYPES == ultra.DATASET_KEY_TYPES
    paths = [
        "/d/images/train/a.jpg", "/d/images/x/images/b.PNG", "/d/imgs/c.jpeg", "rel/images/d.jpg", "images/e.jpg",
        "/d/images/f.tar.jpg", "/d/images/noext", "/a.b/images/c",
    ]
    assert L.img2label_paths(paths) == ultra.img2label_paths(paths)
    from ultralytics.utils import DATASETS_DIR

    assert datasets_dir() == DATASETS_DIR


AGREE = [
    "ok-detect", "labels-wrong-columns", "class-id-out-of-range", "coords-out-of-range", "label-unparseable",
    "truncated-jpeg", "corrupt-image", "empty-image-file", "image-too-small", "image-without-label",
    "empty-label-file", "ok-pose", "pose-wrong-keypoints", "ok-segment", "segment-odd-coordinates", "txt-list-splits",
    "split-overlap",
]


@pytest.mark.parametrize("fixture", AGREE)
def test_resolution_and_verdicts_agree_with_ultralytics(ultra, fixture, tmp_path, monkeypatch):
    """Same split paths, same image lists, and the images Ultralytics drops are those we flag."""
    from types import SimpleNamespace

    from ultralytics.data.base import BaseDataset

    root = tmp_path / fixture
    shutil.copytree(FIX / fixture, root)  # Ultralytics rewrites truncated JPEGs in place: work on a copy
    monkeypatch.setattr(ultra, "check_font", lambda *a, **k: None)  # offline: no font download
    ours = check_dataset(root / "data.yaml", task=TASK_OF.get(fixture))
    theirs = ultra.check_det_dataset(str(root / "data.yaml"), autodownload=False)
    assert Path(theirs["path"]) == ours.index.root
    assert {k: theirs[k] if isinstance(theirs[k], list) else [theirs[k]] for k in ("train", "val")} == {
        k: [str(p) for p in ours.index.split_sources[k]] for k in ("train", "val")
    }
    assert theirs["names"] == ours.index.names
    me = SimpleNamespace(prefix="", fraction=1.0)
    for split in ("train", "val"):
        files = BaseDataset.get_img_files(me, theirs[split])
        assert files == [str(p) for p in ours.index.splits[split]]
    # verdicts: Ultralytics marks an image corrupt (nc=1) exactly when we report a dropping defect for it
    nkpt, ndim = theirs.get("kpt_shape", (0, 0))
    dropped = set()
    for img in ours.index.all_images():
        lbl = L.img2label_paths([str(img)])[0]
        args = (str(img), lbl, "", ours.index.task == "pose", len(theirs["names"]), nkpt, ndim, False)
        if ultra.verify_image_label(args)[8]:
            dropped.add(str(img))
    drop_ids = {"DS106", "DS105", "DS108", "DS111", "DS112", "DS113", "DS114"}
    flagged = set()
    for f in ours.findings:
        if f.id in drop_ids:
            for e in f.evidence["examples"]:
                flagged.add(e["file"])
    flagged_imgs = {
        str(img)
        for img in ours.index.all_images()
        if str(img) in flagged or L.img2label_paths([str(img)])[0] in flagged
    }
    # a truncated JPEG is re-encoded by Ultralytics when PIL can still decode it, dropped when not: either is fine
    truncated = {e["file"] for f in ours.findings if f.id == "DS107" for e in f.evidence["examples"]}
    assert dropped - truncated == flagged_imgs - truncated


# ---------------------------------------------------------------------------------------------------------------------
# property-based: malformed inputs never crash the check

def _n(default: int) -> int:
    """max_examples; YOLODOCTOR_FUZZ_EXAMPLES=5000 runs a long campaign."""
    return int(os.environ.get("YOLODOCTOR_FUZZ_EXAMPLES", default))


SAFE_STR = st.one_of(
    st.sampled_from(["images/train", "images/val", "train.txt", "missing", "", "../x", ".", "./images/train", "a.jpg"]),
    st.text(alphabet="abcxyz019_- ", max_size=8),
)
SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-3, 10**6), st.floats(allow_nan=True), SAFE_STR)
VALUE = st.recursive(
    SCALAR,
    lambda c: st.lists(c, max_size=4) | st.dictionaries(SAFE_STR | st.integers(-2, 5), c, max_size=4),
    max_leaves=10,
)
KEYS = st.sampled_from(
    ["train", "val", "test", "names", "nc", "path", "kpt_shape", "flip_idx", "download", "validation", "channels"]
)


@pytest.fixture(scope="module")
def fuzz_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz") / "ds"
    shutil.copytree(FIX / "ok-detect", root)
    (root / "train.txt").write_text("./images/train/a.jpg\n")
    return root


def _bounded(root: Path, **kw) -> DatasetCheck | None:
    t = time.perf_counter()
    try:
        res = check_dataset(root / "data.yaml", **kw)
    except InputError:
        return None
    assert isinstance(res, DatasetCheck)
    for f in res.findings:
        json.dumps(f.to_dict())
    json.dumps(res.facts)
    assert time.perf_counter() - t < 5
    return res


@settings(max_examples=_n(60), deadline=3000, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=300))
def test_fuzz_yaml_text(fuzz_root, monkeypatch, text):
    monkeypatch.chdir(fuzz_root)
    (fuzz_root / "data.yaml").write_text(text, encoding="utf-8", errors="surrogatepass")
    _bounded(fuzz_root)


@settings(max_examples=_n(60), deadline=3000, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=300))
def test_fuzz_yaml_bytes(fuzz_root, monkeypatch, raw):
    monkeypatch.chdir(fuzz_root)
    (fuzz_root / "data.yaml").write_bytes(raw)
    _bounded(fuzz_root)


@settings(max_examples=_n(80), deadline=3000, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=st.dictionaries(KEYS, VALUE, max_size=7), task=st.sampled_from([None, "detect", "segment", "pose", "obb"]))
def test_fuzz_yaml_structures(fuzz_root, monkeypatch, doc, task):
    monkeypatch.chdir(fuzz_root)
    doc.pop("download", None) if doc.get("download") is not None and not isinstance(doc["download"], str) else None
    (fuzz_root / "data.yaml").write_text(yaml.safe_dump(doc))
    _bounded(fuzz_root, task=task)


@pytest.fixture(scope="module")
def label_root(tmp_path_factory):
    """One image (images/train/b.jpg) whose label file the tests rewrite; val is the same folder."""
    root = tmp_path_factory.mktemp("lbl") / "ds"
    shutil.copytree(FIX / "ok-detect", root)
    for stem in ("a", "c"):
        (root / f"images/train/{stem}.jpg").unlink()
        (root / f"labels/train/{stem}.txt").unlink()
    return root


TASKS_YAML = {
    "detect": "names: [a, b, c]\n",
    "segment": "names: [a, b, c]\n",
    "obb": "names: [a, b, c]\n",
    "pose": "names: [a, b, c]\nkpt_shape: [2, 3]\n",
}


def _write_task(root: Path, task: str) -> None:
    (root / "data.yaml").write_text("train: images/train\nval: images/train\n" + TASKS_YAML[task])


@settings(max_examples=_n(80), deadline=3000, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=400), task=st.sampled_from(sorted(TASKS_YAML)))
def test_fuzz_label_bytes(label_root, raw, task):
    _write_task(label_root, task)
    (label_root / "labels/train/b.txt").write_bytes(raw)
    res = _bounded(label_root, task=task)
    assert res is not None
    nlines = max(1, len(raw.decode("utf-8-sig", errors="replace").splitlines()))
    for f in res.findings:
        for e in f.evidence.get("examples", []):
            if e.get("line") is not None:
                assert 1 <= e["line"] <= nlines


NUM = st.one_of(
    st.floats(-2, 2, allow_nan=False),
    st.integers(-3, 5),
    st.sampled_from(["nan", "inf", "-0", "1e-3", "0x1", "1,5", "", "abc"]),
)


@settings(max_examples=_n(80), deadline=3000, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.lists(NUM, max_size=16), max_size=8), task=st.sampled_from(sorted(TASKS_YAML)))
def test_fuzz_label_rows(label_root, rows, task):
    _write_task(label_root, task)
    text = "\n".join(" ".join(str(v) for v in r) for r in rows)
    (label_root / "labels/train/b.txt").write_text(text)
    res = _bounded(label_root, task=task)
    n_rows = sum(1 for line in text.splitlines() if line.split())
    label_ids = {"DS111", "DS112", "DS113", "DS114", "DS115", "DS116"}
    flagged = [f for f in res.findings if f.id in label_ids]
    assert sum(f.evidence["rows"] for f in flagged) <= n_rows * 4  # class, coords, size, or a duplicate
    assert all(f.evidence["files"] == 1 for f in flagged)
    for f in flagged:
        assert all(Path(e["file"]).name == "b.txt" and 1 <= e["line"] <= len(rows) for e in f.evidence["examples"])
    if n_rows == 0:
        assert res.facts["dataset.labels.empty"] == 1


ROW = st.tuples(
    st.integers(0, 2),
    st.floats(0.05, 0.95),
    st.floats(0.05, 0.95),
    st.floats(0.01, 0.5),
    st.floats(0.01, 0.5),
)


@settings(max_examples=_n(40), deadline=3000, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(ROW, min_size=1, max_size=10, unique_by=lambda r: tuple(round(v, 5) for v in r)))
def test_valid_detect_rows_never_flagged(label_root, rows):
    _write_task(label_root, "detect")
    text = "".join(f"{c} {x:.6f} {y:.6f} {w:.6f} {h:.6f}\n" for c, x, y, w, h in rows)
    (label_root / "labels/train/b.txt").write_text(text)
    res = _bounded(label_root)
    rounded = {tuple(float(f"{v:.6f}") for v in r) for r in rows}
    if len(rounded) == len(rows):
        assert not errors(res), [(f.id, f.evidence) for f in res.findings]


TOKEN = st.one_of(
    st.floats(-0.05, 1.05, allow_nan=False).map(lambda v: f"{v:.4f}"),
    st.integers(-1, 4).map(str),
    st.sampled_from(["0", "1", "0.5", "1.0", "-0.005", "1.005", "1.02", "nan", "inf", "1e39", "x", "2.5", "0.0"]),
)
LINE = st.lists(TOKEN, min_size=0, max_size=15).map(" ".join)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # Ultralytics casts 1e39 to float32
@settings(max_examples=_n(150), deadline=5000, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(LINE, max_size=6), task=st.sampled_from(["detect", "pose"]), sep=st.sampled_from(["\n", "\r\n"]))
def test_drop_verdict_matches_ultralytics(ultra, label_root, lines, task, sep):
    """Random rows: Ultralytics drops the image exactly when we report a defect that makes it drop the image."""
    _write_task(label_root, task)
    lbl = label_root / "labels/train/b.txt"
    lbl.write_text(sep.join(lines), newline="")
    img = label_root / "images/train/b.jpg"
    nkpt, ndim = (2, 3) if task == "pose" else (0, 0)
    theirs = ultra.verify_image_label((str(img), str(lbl), "", task == "pose", 3, nkpt, ndim, False))
    res = check_dataset(label_root / "data.yaml", task=task, workers=1)
    ours = {f.id for f in res.findings} & {"DS111", "DS112", "DS113", "DS114"}
    assert bool(theirs[8]) == bool(ours), (theirs[9], [(f.id, f.evidence) for f in res.findings])


def test_an_unidentified_image_installs_nothing(tmp_path, monkeypatch):
    # Ultralytics' patched Image.open pip-installs pi-heif on the first file PIL cannot identify; check must not
    import ultralytics.utils.checks as checks
    import ultralytics.utils.patches

    from yolodoctor.check.labels import Agg, check_image

    asked = []
    monkeypatch.setattr(checks, "check_requirements", lambda *a, **k: asked.append(a))
    monkeypatch.setattr(ultralytics.utils.patches, "_pil_plugins_registered", False)
    bad = tmp_path / "noise.jpg"
    bad.write_bytes(bytes(range(256)) * 20)
    agg = Agg()
    check_image(str(bad), agg)
    assert asked == []
    assert agg.defects["img_corrupt"][2][0]["reason"] == "PIL cannot read it: not an image format PIL recognises"
