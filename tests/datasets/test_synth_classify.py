"""Tests for yolodoctor.datasets.synth.make_classify_dataset: the class-folder layout, determinism, the class drawn
in each image, safety of force, and that Ultralytics' own classification reader takes the folder."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from yolodoctor.datasets.synth import (
    MARKER,
    class_names,
    make_classify_dataset,
    make_dataset,
    render_class_image,
)


def _hashes(root: Path) -> dict[str, str]:
    files = sorted(p for split in ("train", "val") for p in (root / split).rglob("*") if p.is_file())
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def test_layout_marker_and_info(tmp_path: Path) -> None:
    info = make_classify_dataset(tmp_path / "ds", images=10, width=64, height=48, classes=3, workers=1)
    root = info.root
    assert sorted(p.name for p in root.iterdir()) == sorted([MARKER, "train", "val"])  # no data.yaml
    names = ["disc", "box", "star"]
    assert info.names == tuple(names) and list(class_names(3).values()) == names
    for split in ("train", "val"):
        assert sorted(p.name for p in (root / split).iterdir()) == sorted(names)
    per_class = {n: len(list((root / "train" / n).glob("*.jpg"))) for n in names}
    assert per_class == {"disc": 4, "box": 3, "star": 3}  # image i is of class i % 3
    assert info.val_images == 3  # max(classes, images // 5): every class has validation images
    assert all(len(list((root / "val" / n).glob("*.jpg"))) == 1 for n in names)
    img = cv2.imread(str(root / "train" / "box" / "000001.jpg"))
    assert img.shape == (48, 64, 3)
    marker = json.loads((root / MARKER).read_text())
    assert marker["complete"] and marker["options"]["task"] == "classify" and marker["counts"] == {"train": 10,
                                                                                                    "val": 3}
    d = info.to_dict()
    assert d["root"] == str(root) and d["names"] == names and d["total_bytes"] > 0


def test_more_classes_than_images_leaves_empty_class_folders(tmp_path: Path) -> None:
    root = make_classify_dataset(tmp_path / "ds", images=2, val_images=1, width=32, height=32, classes=4,
                                 workers=1).root
    counts = {p.name: len(list(p.iterdir())) for p in (root / "train").iterdir()}
    assert counts == {"disc": 1, "box": 1, "star": 0, "triangle": 0}


def test_same_seed_is_byte_identical_across_workers(tmp_path: Path) -> None:
    a = make_classify_dataset(tmp_path / "a", images=30, width=64, height=64, seed=3, workers=1).root
    b = make_classify_dataset(tmp_path / "b", images=30, width=64, height=64, seed=3, workers=3).root
    c = make_classify_dataset(tmp_path / "c", images=30, width=64, height=64, seed=4, workers=1).root
    assert _hashes(a) == _hashes(b) and _hashes(a) != _hashes(c)


def test_png_format(tmp_path: Path) -> None:
    root = make_classify_dataset(tmp_path / "ds", images=3, image_format="png", width=40, height=40,
                                 workers=1).root
    files = sorted(p.name for p in (root / "train").rglob("*") if p.is_file())
    assert files == ["000000.png", "000001.png", "000002.png"]


def test_the_class_is_drawn_on_the_background() -> None:
    """The image is render_image's background with one shape over it: the shape changes a large share of it."""
    seed = np.random.SeedSequence(7, spawn_key=(0, 0))
    img = render_class_image(seed, 96, 96, cls=1).astype(int)
    again = render_class_image(np.random.SeedSequence(7, spawn_key=(0, 0)), 96, 96, cls=1).astype(int)
    assert (img == again).all()
    other = render_class_image(np.random.SeedSequence(7, spawn_key=(0, 0)), 96, 96, cls=0).astype(int)
    changed = (np.abs(img - other).sum(axis=2) > 60).mean()
    assert changed > 0.05  # a box and a disc on the same background differ in a real share of the pixels


def test_force_replaces_only_ours(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    make_classify_dataset(out, images=6, width=32, height=32, workers=1)
    with pytest.raises(FileExistsError, match="force"):
        make_classify_dataset(out, images=3, width=32, height=32, workers=1)
    (out / "notes.md").write_text("keep me")
    (out / "train.cache").write_bytes(b"stale")
    (out / "train" / "box" / "extra.jpg").write_bytes(b"stale")
    make_classify_dataset(out, images=3, width=32, height=32, workers=1, force=True)
    assert (out / "notes.md").read_text() == "keep me" and not (out / "train.cache").exists()
    assert sorted(p.name for p in (out / "train").rglob("*.jpg")) == ["000000.jpg", "000001.jpg", "000002.jpg"]
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "thesis.txt").write_text("precious")
    with pytest.raises(FileExistsError, match="not made by yolodoctor"):
        make_classify_dataset(foreign, images=2, workers=1, force=True)


def test_rejects_bad_options(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="classes"):
        make_classify_dataset(tmp_path / "a", classes=0)
    with pytest.raises(ValueError, match="image_format"):
        make_classify_dataset(tmp_path / "b", image_format="gif")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="make_classify_dataset"):
        make_dataset(tmp_path / "c", task="classify")  # type: ignore[arg-type]
    assert not any(tmp_path.iterdir())


def test_ultralytics_reads_the_folder(tmp_path: Path) -> None:
    from ultralytics.cfg import get_cfg
    from ultralytics.data.dataset import ClassificationDataset
    from ultralytics.data.utils import check_cls_dataset

    root = make_classify_dataset(tmp_path / "ds", images=9, width=48, height=48, workers=1).root
    data = check_cls_dataset(str(root), split="val")
    assert data["nc"] == 3 and sorted(data["names"].values()) == ["box", "disc", "star"]
    train = ClassificationDataset(str(data["train"]), get_cfg(overrides={"imgsz": 32}), augment=False, prefix="train",
                                  names=data["names"])
    assert len(train.samples) == 9
    sample = train[0]
    assert tuple(sample["img"].shape) == (3, 32, 32)
