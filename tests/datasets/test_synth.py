"""Tests for yolodoctor.datasets.synth: layout, determinism, label truth, sizes, safety, Ultralytics compatibility."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import cv2
import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from yolodoctor.datasets.synth import FLIP_IDX, MARKER, DatasetInfo, class_names, make_dataset, render_image

TASKS = ("detect", "segment", "pose", "obb")
NKPT = len(FLIP_IDX)


# ----------------------------------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------------------------------


def _hashes(root: Path) -> dict[str, str]:
    """SHA-256 of every image and label file, by path relative to the dataset root."""
    files = sorted(p for sub in ("images", "labels") for p in (root / sub).rglob("*") if p.is_file())
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def _rows(label: Path) -> list[list[float]]:
    return [[float(v) for v in line.split()] for line in label.read_text().splitlines()]


def _expected_columns(task: str, n: int) -> bool:
    if task == "detect":
        return n == 5
    if task == "segment":
        return n >= 7 and n % 2 == 1
    if task == "pose":
        return n == 5 + 3 * NKPT
    return n == 9


def _box_px(row: list[float], task: str, width: int, height: int) -> tuple[float, float, float, float]:
    """Pixel box (x0, y0, x1, y1) of a label row, whatever the task."""
    if task in ("detect", "pose"):
        xc, yc, w, h = row[1:5]
        return (xc - w / 2) * width, (yc - h / 2) * height, (xc + w / 2) * width, (yc + h / 2) * height
    pts = np.array(row[1:]).reshape(-1, 2) * (width, height)
    return pts[:, 0].min(), pts[:, 1].min(), pts[:, 0].max(), pts[:, 1].max()


def _grow(mask: np.ndarray, pixels: int = 2) -> np.ndarray:
    kernel = np.ones((2 * pixels + 1, 2 * pixels + 1), np.uint8)
    return cv2.dilate(mask.astype(np.uint8), kernel).astype(bool)


def _polygon_mask(row: list[float], width: int, height: int) -> np.ndarray:
    pts = np.array(row[1:]).reshape(-1, 2) * (width, height) - 0.5  # continuous -> OpenCV pixel-centre coordinates
    mask = np.zeros((height, width), np.uint8)
    cv2.fillPoly(mask, [np.round(pts * 16).astype(np.int32)], 1, lineType=cv2.LINE_8, shift=4)
    return mask.astype(bool)


# ----------------------------------------------------------------------------------------------------------
# Layout, yaml, marker, DatasetInfo
# ----------------------------------------------------------------------------------------------------------


def test_layout_yaml_marker_and_info(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    calls: list[tuple[int, int]] = []
    info = make_dataset(out, images=5, seed=3, width=320, height=256, workers=1,
                        progress=lambda done, total: calls.append((done, total)))

    assert isinstance(info, DatasetInfo)
    assert (info.train_images, info.val_images) == (5, 2)  # default val: max(2, images // 5)
    for split, n in (("train", 5), ("val", 2)):
        names = [f"{i:06d}" for i in range(n)]
        assert sorted(p.name for p in (out / "images" / split).iterdir()) == [f"{s}.jpg" for s in names]
        assert sorted(p.name for p in (out / "labels" / split).iterdir()) == [f"{s}.txt" for s in names]

    data = yaml.safe_load((out / "data.yaml").read_text())
    assert Path(data["path"]).is_absolute() and Path(data["path"]) == out.resolve()
    assert (data["train"], data["val"]) == ("images/train", "images/val")
    assert data["names"] == {0: "disc", 1: "box", 2: "star"}
    assert "kpt_shape" not in data

    marker = json.loads((out / MARKER).read_text())
    assert marker["seed"] == 3 and marker["complete"] is True
    assert marker["counts"] == {"train": 5, "val": 2}
    assert marker["options"]["task"] == "detect" and marker["options"]["width"] == 320

    on_disk = sum(p.stat().st_size for sub in ("images", "labels") for p in (out / sub).rglob("*") if p.is_file())
    assert info.total_bytes == on_disk + (out / "data.yaml").stat().st_size
    assert info.yaml_path == out.resolve() / "data.yaml" and info.seconds > 0
    as_dict = json.loads(json.dumps(info.to_dict()))
    assert as_dict["root"] == str(out.resolve()) and as_dict["train_images"] == 5

    assert calls[0] == (0, 7) and calls[-1] == (7, 7)
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)


def test_class_names_are_readable_and_unique() -> None:
    names = class_names(100)
    assert names[0] == "disc" and names[2] == "star" and names[8] == "striped_disc"
    assert len(set(names.values())) == 100


# ----------------------------------------------------------------------------------------------------------
# Determinism
# ----------------------------------------------------------------------------------------------------------


def test_same_seed_is_byte_identical_across_workers(tmp_path: Path) -> None:
    kwargs = dict(images=28, val_images=4, seed=11, width=256, height=192, task="segment")
    one = make_dataset(tmp_path / "w1", workers=1, **kwargs)
    calls: list[tuple[int, int]] = []
    two = make_dataset(tmp_path / "w2", workers=2, progress=lambda d, t: calls.append((d, t)), **kwargs)
    other = make_dataset(tmp_path / "seed", workers=2, **{**kwargs, "seed": 12})

    h1, h2, h3 = _hashes(one.root), _hashes(two.root), _hashes(other.root)
    assert len(h1) == 2 * 32
    assert h1 == h2
    assert h1.keys() == h3.keys() and not set(h1.values()) & set(h3.values())
    assert one.total_bytes == two.total_bytes
    assert calls[-1] == (32, 32) and len(calls) > 2  # several chunks reported


# ----------------------------------------------------------------------------------------------------------
# Label format and truth
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("task", TASKS)
def test_label_rows_follow_ultralytics_format(tmp_path: Path, task: str) -> None:
    width, height, classes = 320, 240, 8
    info = make_dataset(tmp_path / task, images=10, val_images=2, seed=5, task=task, width=width, height=height,
                        classes=classes, objects=(2, 7), workers=1)
    counts = []
    for label in sorted((info.root / "labels").rglob("*.txt")):
        text = label.read_text()
        lines = text.splitlines()
        assert len(lines) == len(set(lines)), f"duplicate rows in {label}"
        rows = _rows(label)
        counts.append(len(rows))
        for row in rows:
            assert _expected_columns(task, len(row)), f"{task}: {len(row)} columns in {label}"
            assert row[0] == int(row[0]) and 0 <= row[0] < classes
            coords = np.array(row[1:])
            if task == "pose":
                kpts = coords[4:].reshape(NKPT, 3)
                assert set(kpts[:, 2]) <= {0.0, 1.0, 2.0}
                coords = np.concatenate([coords[:4], kpts[:, :2].ravel()])
            assert coords.min() >= 0 and coords.max() <= 1, f"out of range in {label}: {row}"
            x0, y0, x1, y1 = _box_px(row, task, width, height)
            assert x1 - x0 >= 4 and y1 - y0 >= 4, f"degenerate object in {label}: {row}"
    assert all(2 <= n <= 7 for n in counts), counts
    assert len(set(counts)) > 1  # the number of objects varies


@pytest.mark.parametrize("task", TASKS)
def test_labels_match_drawn_pixels(tmp_path: Path, task: str) -> None:
    """Same seed without objects renders the same background and noise: the difference is what was drawn."""
    width, height = 320, 256
    common = dict(images=4, val_images=1, seed=21, task=task, image_format="png", width=width, height=height,
                  classes=8, workers=1)
    with_objects = make_dataset(tmp_path / "objects", objects=(3, 6), **common)
    empty = make_dataset(tmp_path / "empty", objects=(0, 0), **common)

    for image in sorted((with_objects.root / "images" / "train").glob("*.png")):
        drawn = cv2.imread(str(image))
        background = cv2.imread(str(empty.root / "images" / "train" / image.name))
        changed = np.any(drawn != background, axis=2)
        assert (empty.root / "labels" / "train" / f"{image.stem}.txt").read_text() == ""
        rows = _rows(with_objects.root / "labels" / "train" / f"{image.stem}.txt")
        assert rows
        covered = np.zeros_like(changed)
        in_polygons = np.zeros_like(changed)
        for row in rows:
            x0, y0, x1, y1 = _box_px(row, task, width, height)
            slack = 1 if task == "segment" else 0  # polygon vertices sit on the outline's pixel centres
            box = (slice(max(0, round(y0) - slack), round(y1) + slack),
                   slice(max(0, round(x0) - slack), round(x1) + slack))
            covered[box] = True
            if task in ("segment", "obb"):
                in_polygons |= _grow(_polygon_mask(row, width, height))
            ys, xs = np.nonzero(changed[box])
            assert len(xs) > 0.3 * (x1 - x0) * (y1 - y0), "box holds too little of a drawn object"
            if task != "obb":  # tight: the drawn pixels reach every side of the box (anti-aliasing slack)
                assert xs.min() <= 2 and ys.min() <= 2
                assert xs.max() >= round(x1) - round(x0) - 3 and ys.max() >= round(y1) - round(y0) - 3
            _check_task_geometry(task, row, changed, width, height)
        assert not np.any(changed & ~covered), "pixels were drawn outside every label box"
        if task in ("segment", "obb"):
            assert not np.any(changed & ~in_polygons), "pixels were drawn outside every polygon"


def _check_task_geometry(task: str, row: list[float], changed: np.ndarray, width: int, height: int) -> None:
    """Polygon rows (segment, obb) hug the drawn shape; pose keypoints lie on it."""
    if task in ("segment", "obb"):
        inside = _polygon_mask(row, width, height)
        own = changed & _grow(inside)
        assert own.sum() > 0.3 * inside.sum(), "polygon holds too little of a drawn object"
        if task == "segment":  # the outline follows the shape: nearly all of the polygon was drawn on
            assert changed[inside].mean() > 0.9
    if task == "obb":  # tight: every side of the rotated box touches drawn pixels
        corners = np.array(row[1:]).reshape(4, 2) * (width, height)
        ys, xs = np.nonzero(own)
        drawn = np.stack([xs + 0.5, ys + 0.5], axis=1)
        for a, b in zip(corners, np.roll(corners, -1, axis=0), strict=False):
            normal = np.array([a[1] - b[1], b[0] - a[0]]) / np.linalg.norm(b - a)
            along = (drawn - a) @ (b - a) / np.dot(b - a, b - a)
            near_side = np.abs((drawn - a) @ normal)[(along >= 0) & (along <= 1)]
            assert near_side.min() <= 2.0, "a side of the oriented box touches nothing drawn"
    if task == "pose":
        near = _grow(changed)
        for x, y, _ in np.array(row[5:]).reshape(NKPT, 3):
            assert near[min(int(y * height), height - 1), min(int(x * width), width - 1)], "keypoint off the object"


# ----------------------------------------------------------------------------------------------------------
# Files: sizes, formats, resolutions, yaml per task
# ----------------------------------------------------------------------------------------------------------


def test_jpeg_size_is_realistic(tmp_path: Path) -> None:
    info = make_dataset(tmp_path / "jpg", images=16, seed=1, workers=1)
    sizes = [p.stat().st_size for p in (info.root / "images" / "train").glob("*.jpg")]
    assert len(sizes) == 16
    assert 50_000 <= np.mean(sizes) <= 150_000, f"mean JPEG size {np.mean(sizes):.0f} bytes"
    image = cv2.imread(str(info.root / "images" / "train" / "000000.jpg"))
    assert image.shape == (480, 640, 3)
    assert float(image.std()) > 20  # not a flat picture


def test_png_option_writes_png(tmp_path: Path) -> None:
    info = make_dataset(tmp_path / "png", images=2, image_format="png", width=200, height=150, workers=1)
    files = sorted((info.root / "images").rglob("*.*"))
    assert files and all(p.suffix == ".png" for p in files)
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in files)
    assert cv2.imread(str(files[0])).shape == (150, 200, 3)
    assert info.image_format == "png"


def test_large_resolution(tmp_path: Path) -> None:
    info = make_dataset(tmp_path / "big", images=1, val_images=1, width=4000, height=3000, workers=1)
    image = cv2.imread(str(info.root / "images" / "train" / "000000.jpg"))
    assert image.shape == (3000, 4000, 3)
    rows = _rows(info.root / "labels" / "train" / "000000.txt")
    assert 2 <= len(rows) <= 6


def test_pose_yaml_has_kpt_shape_and_flip_idx(tmp_path: Path) -> None:
    info = make_dataset(tmp_path / "pose", images=2, task="pose", width=160, height=128, workers=1)
    data = yaml.safe_load(info.yaml_path.read_text())
    assert data["kpt_shape"] == [NKPT, 3]
    flip = data["flip_idx"]
    assert len(flip) == NKPT and sorted(flip) == list(range(NKPT))
    assert [flip[i] for i in flip] == list(range(NKPT))  # flipping twice is the identity


def test_segment_polygons_have_at_least_three_points(tmp_path: Path) -> None:
    info = make_dataset(tmp_path / "seg", images=6, task="segment", width=256, height=192, classes=8,
                        objects=(4, 8), workers=1)
    rows = [row for label in (info.root / "labels").rglob("*.txt") for row in _rows(label)]
    assert rows and all((len(row) - 1) // 2 >= 3 and len(row) % 2 == 1 for row in rows)


def test_rejects_bad_options(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="task"):
        make_dataset(tmp_path / "a", task="classify")  # type: ignore[arg-type]  # a task it refuses, on purpose
    with pytest.raises(ValueError, match="objects"):
        make_dataset(tmp_path / "b", objects=(5, 2))
    with pytest.raises(ValueError, match="seed"):
        make_dataset(tmp_path / "c", seed=-1)
    assert not any(tmp_path.iterdir())  # nothing written before the options are checked


# ----------------------------------------------------------------------------------------------------------
# Never destroy user files
# ----------------------------------------------------------------------------------------------------------


def test_refuses_non_empty_foreign_directory(tmp_path: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.txt").write_text("precious")
    for force in (False, True):
        with pytest.raises(FileExistsError, match="not made by yolodoctor"):
            make_dataset(out, images=2, workers=1, force=force)
    assert sorted(p.name for p in out.iterdir()) == ["thesis.txt"]
    assert (out / "thesis.txt").read_text() == "precious"

    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(FileExistsError):
        make_dataset(a_file, images=2, workers=1)


def test_empty_existing_directory_is_used(tmp_path: Path) -> None:
    out = tmp_path / "empty"
    out.mkdir()
    info = make_dataset(out, images=2, width=128, height=96, workers=1)
    assert info.train_images == 2 and (out / MARKER).is_file()


def test_marked_dataset_needs_force_and_force_cleans_only_ours(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    make_dataset(out, images=6, seed=1, width=128, height=96, workers=1)
    first = _hashes(out)
    with pytest.raises(FileExistsError, match="force"):
        make_dataset(out, images=3, seed=2, width=128, height=96, workers=1)
    assert _hashes(out) == first

    (out / "notes.md").write_text("keep me")
    (out / "labels" / "train.cache").write_bytes(b"stale")
    (out / "train.cache").write_bytes(b"stale")
    (out / "images" / "train" / "999999.jpg").write_bytes(b"stale")
    info = make_dataset(out, images=3, seed=2, width=128, height=96, workers=1, force=True)

    assert (out / "notes.md").read_text() == "keep me"
    assert not (out / "train.cache").exists() and not (out / "labels" / "train.cache").exists()
    assert sorted(p.name for p in (out / "images" / "train").iterdir()) == ["000000.jpg", "000001.jpg", "000002.jpg"]
    assert json.loads((out / MARKER).read_text())["seed"] == 2
    assert info.train_images == 3 and info.val_images == 2


def test_interrupted_run_leaves_an_incomplete_marker_that_force_replaces(tmp_path: Path) -> None:
    out = tmp_path / "ds"

    def stop(done: int, total: int) -> None:
        if done > 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        make_dataset(out, images=40, width=128, height=96, workers=2, progress=stop)
    marker = json.loads((out / MARKER).read_text())
    assert marker["complete"] is False and marker["counts"] == {}
    assert not (out / "data.yaml").exists()
    with pytest.raises(FileExistsError):
        make_dataset(out, images=4, width=128, height=96, workers=1)
    info = make_dataset(out, images=4, width=128, height=96, workers=1, force=True)
    assert json.loads((out / MARKER).read_text())["complete"] is True
    assert len(list((out / "images" / "train").iterdir())) == info.train_images == 4


# ----------------------------------------------------------------------------------------------------------
# Ultralytics' own verifier and loader
# ----------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ultralytics_data() -> Iterator[ModuleType]:
    """``ultralytics.data.utils``, imported offline (YOLO_OFFLINE=1 must be set before the first import)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("YOLO_OFFLINE", "1")
        import ultralytics.data.utils as data_utils

        yield data_utils


@pytest.mark.parametrize("task", TASKS)
def test_ultralytics_verifies_every_image(tmp_path: Path, task: str, ultralytics_data: ModuleType) -> None:
    info = make_dataset(tmp_path / task, images=4, val_images=2, seed=9, task=task, width=320, height=256,
                        classes=4, workers=1)
    data = yaml.safe_load(info.yaml_path.read_text())
    nkpt, ndim = data.get("kpt_shape", (0, 0))
    images = sorted((info.root / "images").rglob("*.jpg"))
    assert len(images) == 6
    for image in images:
        label = ultralytics_data.img2label_paths([str(image)])[0]
        result = ultralytics_data.verify_image_label(
            (str(image), label, "", task == "pose", len(data["names"]), nkpt, ndim, False))
        _, lb, shape, segments, keypoints, nm, nf, ne, nc, msg = result
        assert (nm, nf, nc, msg) == (0, 1, 0, ""), msg
        assert ne == 0 and len(lb) == len(_rows(Path(label)))
        assert tuple(shape) == (256, 320)  # (height, width)
        if task in ("segment", "obb"):
            assert len(segments) == len(lb)
        if task == "pose":
            assert keypoints.shape == (len(lb), NKPT, 3)


def test_ultralytics_dataset_loads_detect_and_pose(tmp_path: Path, ultralytics_data: ModuleType) -> None:
    from ultralytics.data.dataset import YOLODataset

    for task in ("detect", "pose"):
        info = make_dataset(tmp_path / task, images=4, val_images=1, seed=4, task=task, width=320, height=256,
                            workers=1)
        data = yaml.safe_load(info.yaml_path.read_text())
        dataset = YOLODataset(img_path=str(info.root / "images" / "train"), imgsz=320, augment=False, data=data,
                              task=task)
        assert len(dataset) == 4
        sample = dataset[0]
        assert sample["img"].shape[0] == 3 and len(sample["bboxes"]) == len(_rows(info.root / "labels" / "train" /
                                                                                  "000000.txt"))
        if task == "pose":
            assert sample["keypoints"].shape[1:] == (NKPT, 3)
        assert (info.root / "labels" / "train.cache").exists()


# ----------------------------------------------------------------------------------------------------------
# Any size, any task: valid rows (property test on the renderer)
# ----------------------------------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    width=st.integers(32, 700),
    height=st.integers(32, 700),
    task=st.sampled_from(TASKS),
    seed=st.integers(0, 2**32 - 1),
    most=st.integers(0, 12),
)
def test_any_size_renders_valid_rows(width: int, height: int, task: str, seed: int, most: int) -> None:
    image, rows = render_image(seed, width, height, task, classes=12, objects=(0, most))
    assert image.shape == (height, width, 3) and image.dtype == np.uint8
    assert len(rows) <= most and len(rows) == len(set(rows))
    for text in rows:
        row = [float(v) for v in text.split()]
        assert _expected_columns(task, len(row)) and 0 <= row[0] < 12
        x0, y0, x1, y1 = _box_px(row, task, width, height)
        assert x0 >= -0.01 and y0 >= -0.01 and x1 <= width + 0.01 and y1 <= height + 0.01  # 6-decimal rounding
        assert x1 - x0 >= 4 and y1 - y0 >= 4
        if task == "pose":
            kpts = np.array(row[5:]).reshape(NKPT, 3)
            assert kpts[:, :2].min() >= 0 and kpts[:, :2].max() <= 1
