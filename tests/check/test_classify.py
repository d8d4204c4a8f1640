"""check on classification folders (yolodoctor/check/classify.py): the layout and every image as Ultralytics'
check_cls_dataset and ClassificationDataset read them, the findings with the files they concern, and the RAM a
classification cache takes (full resolution, no resize)."""

from __future__ import annotations

import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest

from yolodoctor.check import classify as C
from yolodoctor.check.dataset import check_dataset
from yolodoctor.check.resources import batch_bytes, probe_resources
from yolodoctor.check.run import dataset_task, task_of
from yolodoctor.datasets.synth import make_classify_dataset
from yolodoctor.diagnosis.engine import evaluate
from yolodoctor.diagnosis.rules import builtin_rules
from yolodoctor.errors import InputError
from yolodoctor.findings import Severity

GB = 1 << 30


def make(root: Path, images: int = 12, **kw) -> Path:
    kw.setdefault("width", 64)
    kw.setdefault("height", 64)
    return make_classify_dataset(root, images=images, workers=1, **kw).root


def findings(facts: dict) -> dict:
    return {f.id: f for f in evaluate(builtin_rules(), facts)[0]}


def serious(facts: dict) -> list:
    return [f for f in evaluate(builtin_rules(), facts)[0] if f.severity >= Severity.warning]


def files_of(finding) -> list[str]:
    return [e["file"] for e in finding.evidence["examples"]]


def write(path: Path, w: int, h: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), np.full((h, w, 3), 128, np.uint8))
    return path


# ---------------------------------------------------------------------------------------------------------------------
# a clean folder


def test_clean_folder_has_no_warning_and_the_right_counts(tmp_path):
    root = make(tmp_path / "ds", images=12, classes=3)
    res = check_dataset(root, task="classify", workers=1)
    f = res.facts
    assert f["dataset.task"] == "classify" and f["dataset.cls.folder"] == str(root)
    assert f["dataset.classes"] == 3 and f["dataset.cls.names"] == ["box", "disc", "star"]
    assert f["dataset.images.train"] == 12 and f["dataset.images.val"] == 3 and f["dataset.images"] == 15
    assert f["dataset.cls.train_per_class"] == {"box": 4, "disc": 4, "star": 4}
    assert f["dataset.cls.val_split"] == "val" and f["dataset.cls.val_images_kept"] == 3
    assert f["dataset.defects"] == [] and f["dataset.images.unusable"] == 0
    assert f["dataset.image_size_median"] == [64, 64]
    assert serious(f) == []
    assert findings(f)["DS130"].evidence["files"] == f"{root / 'train.cache'}, {root / 'val.cache'}"
    assert res.index is not None and len(res.index.splits["train"]) == 12  # what the storage probe samples


def test_a_folder_of_class_folders_is_found_without_a_task(tmp_path):
    root = make(tmp_path / "ds")
    assert check_dataset(root, workers=1).facts["dataset.task"] == "classify"
    (root / "notes.yaml").write_text("a: 1\n")  # a folder with its one yaml stays the data.yaml, as before
    assert check_dataset(root, workers=1).facts.get("dataset.task") != "classify"
    assert check_dataset(root, task="classify", workers=1).facts["dataset.task"] == "classify"


# ---------------------------------------------------------------------------------------------------------------------
# a broken folder: every defect named with its files


@pytest.fixture
def broken(tmp_path) -> Path:
    root = make(tmp_path / "ds", images=12)
    (root / "train" / "disc" / "000000.jpg").write_bytes(b"not an image at all\n")
    cut = root / "train" / "box" / "000001.jpg"
    cut.write_bytes(cut.read_bytes()[:-2])
    (root / "train" / "zz_empty").mkdir()
    (root / "val" / "ghost").mkdir()
    shutil.copy(root / "val" / "disc" / "000000.jpg", root / "val" / "ghost" / "a.jpg")
    write(root / "train" / "star" / "tiny.png", 5, 5)
    (root / "train" / "star" / "notes.txt").write_text("not an image\n")
    (root / "train" / "stray.jpg").write_bytes((root / "val" / "disc" / "000000.jpg").read_bytes())
    (root / "train" / "star" / "empty.jpg").write_bytes(b"")
    return root


def test_broken_folder_findings_name_the_files(broken):
    f = check_dataset(broken, task="classify", workers=1).facts
    found = findings(f)
    t = broken / "train"
    assert files_of(found["DS106"]) == [str(t / "disc" / "000000.jpg")]
    assert files_of(found["DS107"]) == [str(t / "box" / "000001.jpg")]
    assert "Ultralytics drops it" in found["DS107"].evidence["examples"][0]["reason"]  # cut short: does not decode
    assert files_of(found["DS108"]) == [str(t / "star" / "tiny.png")]
    assert files_of(found["DS105"]) == [str(t / "star" / "empty.jpg")]
    assert found["DS128"].severity == Severity.warning and "zz_empty" in found["DS128"].message
    assert f["dataset.classes"] == 4  # the empty folder still counts in nc
    assert found["DS125"].evidence == {"folders": "ghost", "images": 1}
    assert found["DS127"].evidence["classes"] == "zz_empty"
    assert sorted(e["file"] for e in found["DS129"].evidence["examples"]) == [
        str(t / "star" / "notes.txt"), str(t / "stray.jpg")]
    assert "DS126" not in found and "DS122" not in found
    assert f["dataset.images.train"] == 14 and f["dataset.images.val"] == 4  # 12 + tiny + empty; stray not read


def test_no_validation_folder_is_an_error(tmp_path):
    root = make(tmp_path / "ds")
    shutil.rmtree(root / "val")
    found = findings(check_dataset(root, task="classify", workers=1).facts)
    assert found["DS122"].severity == Severity.error
    (root / "test" / "box").mkdir(parents=True)
    shutil.copy(root / "train" / "box" / "000001.jpg", root / "test" / "box")
    f = check_dataset(root, task="classify", workers=1).facts
    found = findings(f)
    assert f["dataset.cls.val_split"] == "test" and "DS122" not in found
    assert found["DS123"].severity == Severity.warning
    assert found["DS127"].evidence["classes"] == "disc, star"  # test/ holds only box


def test_validation_folders_unknown_to_train_are_meaningless_labels(tmp_path):
    root = make(tmp_path / "ds")
    for d in (root / "val").iterdir():
        d.rename(d.with_name(d.name.upper()))
    found = findings(check_dataset(root, task="classify", workers=1).facts)
    assert found["DS126"].severity == Severity.error
    assert found["DS126"].evidence == {"val_classes": "BOX, DISC, STAR", "train_classes": "box, disc, star"}
    assert not {"DS125", "DS127", "DS124"} & set(found)


def test_validation_without_a_class_folder_stops_the_training(tmp_path):
    root = make(tmp_path / "ds")
    for img in list((root / "val").rglob("*.jpg")):
        img.rename(root / "val" / img.name)
    for d in (root / "val").iterdir():
        if d.is_dir():
            d.rmdir()
    found = findings(check_dataset(root, task="classify", workers=1).facts)
    assert found["DS124"].severity == Severity.error and found["DS124"].evidence == {"folder": f"{root}/val"}
    assert found["DS129"].evidence["files"] == 3  # the images outside class folders are not read


def test_no_training_images(tmp_path):
    root = make(tmp_path / "ds")
    for img in (root / "train").rglob("*.jpg"):
        img.unlink()
    found = findings(check_dataset(root, task="classify", workers=1).facts)
    assert found["DS121"].severity == Severity.error
    assert "DS128" not in found  # every folder is empty: DS121 says it


def test_a_folder_without_train_is_copied_80_20(tmp_path):
    src = make(tmp_path / "src", images=12)
    flat = tmp_path / "flat"
    shutil.copytree(src / "train", flat)
    (flat / "zz_empty").mkdir()
    f = check_dataset(flat, task="classify", workers=1).facts
    found = findings(f)
    assert found["DS120"].severity == Severity.warning
    assert found["DS120"].evidence["creates"] == f"{flat}_split"
    assert (f["dataset.images.train"], f["dataset.images.val"]) == (9, 3)  # int(4 * 0.8) = 3 of each 4 to train
    assert f["dataset.cls.names"] == ["box", "disc", "star", "zz_empty"]
    assert not (tmp_path / "flat_split").exists()  # nothing copied by check
    assert found["DS130"].evidence["files"] == f"{flat}_split/train.cache, {flat}_split/val.cache"


def test_the_split_plan_is_ultralytics_split(tmp_path):
    from ultralytics.data.split import split_classify_dataset

    src = make(tmp_path / "src", images=23, classes=3)
    flat = tmp_path / "flat"
    shutil.copytree(src / "train", flat)
    train, val = C.split_plan(flat)
    out = split_classify_dataset(flat)
    for ours, theirs in ((train, out / "train"), (val, out / "val")):
        assert sorted(str(Path(p).relative_to(flat)) for p, _ in ours.samples) == sorted(
            str(p.relative_to(theirs)) for p in theirs.rglob("*.jpg"))


def test_unwritable_folders_turn_the_findings_to_warnings(tmp_path, monkeypatch):
    root = make(tmp_path / "ds")
    monkeypatch.setattr(C, "_writable", lambda d: False)
    f = check_dataset(root, task="classify", workers=1).facts
    found = findings({**f, "args.cache": "disk"})
    assert found["DS130"].severity == Severity.warning
    assert found["DS131"].severity == Severity.warning and f["dataset.cls.npy_unwritable"] == 6
    flat = tmp_path / "flat"
    shutil.copytree(root / "train", flat)
    assert findings(check_dataset(flat, task="classify", workers=1).facts)["DS120"].severity == Severity.error


# ---------------------------------------------------------------------------------------------------------------------
# what the caches take: full resolution


def sized(root: Path) -> Path:
    """train: 2 images 100x50 and 1 image 40x30 of class a, 1 image 200x100 of class b; val: one 64x48 image of each
    class and one of a class train lacks (dropped, not cached)."""
    write(root / "train" / "a" / "1.png", 100, 50)
    write(root / "train" / "a" / "2.jpg", 100, 50)
    write(root / "train" / "a" / "3.png", 40, 30)
    write(root / "train" / "b" / "1.jpg", 200, 100)
    write(root / "val" / "a" / "1.jpg", 64, 48)
    write(root / "val" / "b" / "1.jpg", 64, 48)
    write(root / "val" / "x" / "1.jpg", 640, 480)
    return root


TRAIN_BYTES = (2 * 100 * 50 + 40 * 30 + 200 * 100) * 3
VAL_BYTES = 2 * 64 * 48 * 3


def resources(facts: dict, cache, available: int) -> dict:
    args = {"cache": cache, "imgsz": 224, "batch": 2, "workers": 8}
    res = probe_resources(args, {**facts, "env.device_kind": "cuda", "env.torch_devices": [{"index": 0}]},
                          cpu_count=16, usable=16.0, mem={"total": 2 * available, "available": available},
                          shm_free=8 * GB)
    return {**facts, **res.facts}


def test_ram_cache_is_full_resolution(tmp_path):
    f = check_dataset(sized(tmp_path / "ds"), task="classify", workers=1).facts
    assert f["dataset.cls.decoded_bytes_train"] == TRAIN_BYTES
    assert f["dataset.cls.decoded_bytes_val"] == VAL_BYTES  # the x/ image is dropped: not cached
    r = resources(f, "ram", 64 * GB)
    assert r["cache.ram_bytes"] == TRAIN_BYTES + VAL_BYTES  # no resize to imgsz 224 (detection's estimate)
    assert r["cache.ram_peak"] == max(2 * TRAIN_BYTES, TRAIN_BYTES + 2 * VAL_BYTES)
    assert r["cache.ram_fits"] is True and "cache.ram_required" not in r  # no guard to ask for it
    assert r["loader.workers_effective"] == 2  # 4 train images in batches of 2
    assert r["loader.prefetch_bytes"] == 2 * 4 * batch_bytes(2, 224, "classify")
    assert batch_bytes(16, 224, "classify") == 4 * batch_bytes(16, 224)  # float32 batches
    assert "DS132" not in findings(r)
    short = resources(f, True, r["cache.ram_peak"] - 1)
    assert short["cache.ram_fits"] is False
    found = findings(short)
    assert found["DS132"].severity == Severity.error and found["DS132"].fix.args == {"cache": False}
    assert "MM101" not in found  # detection's guard message does not apply
    assert "DS132" not in findings(resources(f, False, 1024))


def test_disk_cache_bytes(tmp_path):
    f = check_dataset(sized(tmp_path / "ds"), task="classify", workers=1).facts
    assert f["dataset.cls.npy_files"] == 6
    assert f["dataset.cls.npy_bytes"] == TRAIN_BYTES + VAL_BYTES + 6 * C.NPY_HEADER
    found = findings({**f, "args.cache": "disk"})
    assert found["DS131"].severity == Severity.info and found["DS131"].evidence["files"] == 6
    assert "DS131" not in findings({**f, "args.cache": False})


# ---------------------------------------------------------------------------------------------------------------------
# what data= and the task are


def test_a_folder_for_a_detection_task_says_what_to_pass(tmp_path):
    root = make(tmp_path / "ds")
    with pytest.raises(InputError, match=r"data\.yaml.*model=yolo11n-cls\.yaml") as e:
        check_dataset(root, task="detect")
    assert "class folders" in str(e.value) and "\n" not in str(e.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"neither a data\.yaml nor class folders"):
        check_dataset(tmp_path / "empty")


@pytest.mark.parametrize("data,why", [
    ("nowhere-at-all", "no such folder"),
    ("/nowhere/at/all", "no such folder"),
    ("https://example.com/d.zip", "URL"),
    ("/nowhere/d.zip", "archive"),
])
def test_classification_data_that_is_not_a_folder_is_exit_2(data, why):
    with pytest.raises(InputError, match=why):
        check_dataset(data, task="classify")


def test_a_file_is_not_a_classification_folder(tmp_path):
    (tmp_path / "data.yaml").write_text("train: x\n")
    with pytest.raises(InputError, match="takes a folder"):
        check_dataset(tmp_path / "data.yaml", task="classify")


def test_task_of_follows_the_model_then_task():
    assert task_of({"model": "yolo11n-cls.yaml"}) == "classify"
    assert task_of({"model": "yolo11n-cls.pt", "task": "detect"}) == "classify"  # the model decides the trainer
    assert task_of({"task": "classify"}) == "classify"
    assert task_of({"model": "yolo11n.pt"}) is None


def test_dataset_task_reads_a_bare_folder_with_a_detection_model_as_detection(tmp_path):
    root = make(tmp_path / "ds")
    assert dataset_task({"model": "yolo11n.yaml"}, root) == "detect"
    assert dataset_task({}, root) is None  # no model: the folder decides
    assert dataset_task({"model": "yolo11n-cls.yaml"}, root) == "classify"
    (root / "data.yaml").write_text("train: x\n")
    assert dataset_task({"model": "yolo11n.yaml"}, root) is None  # its yaml decides


def test_what_ultralytics_keeps_and_caches_is_what_check_counts(broken, tmp_path):
    """ClassificationDataset itself on a copy (it rewrites JPEGs and writes .cache files): the images it keeps, and
    the bytes of its RAM cache, per split."""
    from ultralytics.cfg import get_cfg
    from ultralytics.data.dataset import ClassificationDataset
    from ultralytics.data.utils import check_cls_dataset

    f = check_dataset(broken, task="classify", workers=1).facts
    copy = tmp_path / "copy"
    shutil.copytree(broken, copy)
    data = check_cls_dataset(str(copy), split="val")
    assert [data["names"][i] for i in range(data["nc"])] == f["dataset.cls.names"]
    args = get_cfg(overrides={"cache": "ram", "imgsz": 64})
    train = ClassificationDataset(str(data["train"]), args, augment=True, prefix="train", names=data["names"])
    val = ClassificationDataset(str(data["val"]), args, augment=False, prefix="val", names=data["names"])
    dropped = sum(d["files"] for d in f["dataset.defects"] if d["kind"] != "jpeg_truncated") + 1  # the cut JPEG
    assert len(train.samples) == f["dataset.images.train"] - dropped
    assert len(val.samples) == f["dataset.cls.val_images_kept"]
    assert int(train.img_cache.offsets[-1]) == f["dataset.cls.decoded_bytes_train"]
    assert int(val.img_cache.offsets[-1]) == f["dataset.cls.decoded_bytes_val"]


def test_pooled_check_finds_what_the_inline_one_does(tmp_path):
    root = make(tmp_path / "ds", images=420, width=32, height=32)
    (root / "train" / "box" / "000001.jpg").write_bytes(b"broken")
    write(root / "train" / "disc" / "tiny.png", 4, 4)
    pooled = check_dataset(root, task="classify", workers=2).facts
    inline = check_dataset(root, task="classify", workers=1).facts
    assert pooled["dataset.check_workers"] == 2 and inline["dataset.check_workers"] == 1
    for key in ("dataset.defects", "dataset.cls.decoded_bytes_train", "dataset.cls.decoded_bytes_val",
                "dataset.images", "dataset.image_size_median"):
        assert pooled[key] == inline[key], key
    assert pooled["dataset.cls.decoded_bytes_train"] == (420 - 1) * 32 * 32 * 3
