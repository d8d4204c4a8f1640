"""Synthetic Ultralytics YOLO datasets, deterministic by seed.

``make_dataset`` writes a dataset in the layout Ultralytics expects::

    out/images/{train,val}/000000.jpg   textured background, several textured shapes, sensor noise
    out/labels/{train,val}/000000.txt   one row per object, in the task's label format
    out/data.yaml                       absolute ``path:``, ``train``/``val``, ``names`` (+ ``kpt_shape``/``flip_idx``)
    out/.yolodoctor-dataset             JSON marker: seed, options, counts (lets ``force=True`` replace it safely)

``make_classify_dataset`` writes a classification dataset (a folder of class folders, no data.yaml: a
classification training takes ``data=out``)::

    out/{train,val}/<class>/000000.jpg  textured background, one large shape of the class, sensor noise
    out/.yolodoctor-dataset             the same marker

Image ``i`` of a split is of class ``i % classes`` (classes spread evenly); the class is the shape drawn, as in the
detection datasets, so it is learnable from the pixels.

Every image is rendered from its own RNG, derived from ``(seed, split, index)`` with
:class:`numpy.random.SeedSequence`, so the files are byte-identical whatever the number of worker processes.
The RNG of an image is split into independent streams for the background, the objects and the noise: the same
seed with ``objects=(0, 0)`` renders exactly the background (and noise) of the images with objects, which lets
tests compare labels with the pixels really drawn.

Labels are measured on what is drawn: each object is rasterised into a mask (anti-aliased edges included), and
its box, polygon, keypoints or oriented box are taken from that mask. Objects never overlap, so every object is
fully visible (convex shapes may be cut by the image border, and their labels are clipped with them).

Only numpy and OpenCV are used (vectorised; the background is built at quarter resolution, the noise comes from
raw 64-bit draws through a lookup table): a 640x480 JPEG takes about 10 ms on one core, rendering and writing
included; PNG takes about 35 ms, mostly zlib.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import json
import math
import multiprocessing as mp
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any, Literal

import cv2
import numpy as np

__all__ = [
    "FLIP_IDX", "KEYPOINTS", "MARKER", "SHAPES", "TASKS", "TEXTURES", "ClassifyDatasetInfo", "DatasetInfo",
    "class_names", "make_classify_dataset", "make_dataset", "render_class_image", "render_image",
]

Task = Literal["detect", "segment", "pose", "obb"]
ImageFormat = Literal["jpg", "png"]
Progress = Callable[[int, int], None]

MARKER = ".yolodoctor-dataset"
TASKS: tuple[str, ...] = ("detect", "segment", "pose", "obb")
CLASSIFY = "classify"
FORMATS: tuple[str, ...] = ("jpg", "png")
SPLITS: tuple[str, ...] = ("train", "val")

# Class i draws shape SHAPES[i % len(SHAPES)]: the class is learnable from the image, as in a real dataset.
SHAPES: tuple[str, ...] = ("disc", "box", "star", "triangle", "hexagon", "cross", "plank", "diamond")
TEXTURES: tuple[str, ...] = ("flat", "striped", "checked", "shaded", "mottled")
_NON_CONVEX = frozenset({"star", "cross"})

# Pose keypoints: the extreme points of the drawn shape and its centroid. A horizontal flip swaps left/right.
KEYPOINTS: tuple[str, ...] = ("top", "right", "bottom", "left", "centre")
FLIP_IDX: tuple[int, ...] = (0, 3, 2, 1, 4)

_MIN_SIDE_PX = 6  # smallest labelled object side, in pixels
_PLACEMENT_ATTEMPTS = 60
_GAP_PX = 2  # free pixels kept between objects' boxes
_BG_SCALE = 4  # the background is synthesised at 1/_BG_SCALE resolution, then upsampled
_PNG_COMPRESSION = 1
_IN_PROCESS_BELOW = 24  # jobs with fewer images are rendered in-process


# ----------------------------------------------------------------------------------------------------------
# Public records
# ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DatasetInfo:
    """What ``make_dataset`` wrote."""

    root: Path
    yaml_path: Path
    task: str
    image_format: str
    train_images: int
    val_images: int
    total_bytes: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dictionary (paths as strings)."""
        return _jsonable(asdict(self))


def _jsonable(fields: dict[str, Any]) -> dict[str, Any]:
    """A dataset info's fields as JSON takes them: paths as strings, tuples as lists."""
    return {k: str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v for k, v in fields.items()}


@dataclass(frozen=True)
class ClassifyDatasetInfo:
    """What ``make_classify_dataset`` wrote: ``root`` is what a classification training takes as data=."""

    root: Path
    task: str
    image_format: str
    names: tuple[str, ...]
    train_images: int
    val_images: int
    total_bytes: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dictionary (paths as strings, tuples as lists)."""
        return _jsonable(asdict(self))


@dataclass(frozen=True)
class _Spec:
    """Everything a worker needs to render and write images (picklable)."""

    root: str
    seed: int
    task: str
    image_format: str
    width: int
    height: int
    classes: int
    objects: tuple[int, int]
    jpeg_quality: int
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def name_width(self) -> int:
        return max(6, len(str(max(self.counts.values(), default=1) - 1)))

    def options(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "image_format": self.image_format,
            "width": self.width,
            "height": self.height,
            "classes": self.classes,
            "objects": list(self.objects),
            "jpeg_quality": self.jpeg_quality,
        }


@dataclass(frozen=True)
class _Object:
    """One drawn object: its class and its rasterised mask, placed at ``(x0, y0)`` in the image."""

    cls: int
    x0: int
    y0: int
    mask: np.ndarray  # uint8, 0..255 coverage, cropped to the object's pixel box


# ----------------------------------------------------------------------------------------------------------
# make_dataset
# ----------------------------------------------------------------------------------------------------------


def class_names(classes: int) -> dict[int, str]:
    """Readable, unique class names: disc, box, star, ...; then striped_disc, ..., checked_disc, ...; then disc_6."""
    names = {}
    for i in range(classes):
        shape, generation, texture = SHAPES[i % len(SHAPES)], i // len(SHAPES), _class_texture(i)
        if generation == 0:
            names[i] = shape
        elif texture is not None:
            names[i] = f"{TEXTURES[texture]}_{shape}"
        else:
            names[i] = f"{shape}_{generation + 1}"
    return names


def _class_texture(cls: int) -> int | None:
    """Texture kind fixed by the class beyond the first len(SHAPES) classes (None: random per object).

    Classes 0..7 are told apart by shape; 8..39 by shape and texture; from 40 on, classes repeat their look.
    """
    generation = cls // len(SHAPES)
    return generation if 1 <= generation < len(TEXTURES) else None


def make_dataset(
    out_dir: str | os.PathLike[str],
    *,
    images: int = 64,
    val_images: int | None = None,
    seed: int = 0,
    task: Task = "detect",
    image_format: ImageFormat = "jpg",
    width: int = 640,
    height: int = 480,
    classes: int = 3,
    objects: tuple[int, int] = (2, 6),
    jpeg_quality: int = 90,
    workers: int | None = None,
    progress: Progress | None = None,
    force: bool = False,
) -> DatasetInfo:
    """Write a synthetic YOLO dataset to ``out_dir`` and describe it.

    ``val_images`` defaults to ``max(2, images // 5)`` extra validation images. Each image holds between
    ``objects[0]`` and ``objects[1]`` objects (fewer only when the image is too small to fit them apart).
    ``workers`` defaults to the cores this process may use. ``progress(done, total)`` is called as images are
    written. An existing non-empty directory is never overwritten unless it holds a yolodoctor dataset and
    ``force`` is true (then only what ``make_dataset`` writes, and Ultralytics' ``*.cache`` files, are removed).

    Raises ``ValueError`` for bad options and ``FileExistsError`` when ``out_dir`` may not be written.
    """
    started = time.perf_counter()
    n_val = max(2, images // 5) if val_images is None else val_images
    if task == CLASSIFY:
        raise ValueError(f"task must be one of {', '.join(TASKS)}, got {task!r} (make_classify_dataset writes class "
                         "folders)")
    _validate(images, n_val, seed, task, image_format, width, height, classes, objects, jpeg_quality, workers)
    root = Path(out_dir).expanduser().resolve()
    spec = _Spec(
        root=str(root), seed=int(seed), task=task, image_format=image_format, width=int(width),
        height=int(height), classes=int(classes), objects=(int(objects[0]), int(objects[1])),
        jpeg_quality=int(jpeg_quality), counts={"train": int(images), "val": int(n_val)},
    )
    _prepare(root, force)
    _write_marker(root, spec, complete=False, total_bytes=0)
    for split in SPLITS:
        (root / "images" / split).mkdir(parents=True, exist_ok=True)
        (root / "labels" / split).mkdir(parents=True, exist_ok=True)
    n_workers = len(os.sched_getaffinity(0)) if workers is None else workers
    total_bytes = _generate(spec, n_workers, progress)
    yaml_path = _write_yaml(root, spec)
    total_bytes += yaml_path.stat().st_size
    _write_marker(root, spec, complete=True, total_bytes=total_bytes)
    return DatasetInfo(
        root=root, yaml_path=yaml_path, task=task, image_format=image_format, train_images=images,
        val_images=n_val, total_bytes=total_bytes, seconds=time.perf_counter() - started,
    )


def make_classify_dataset(
    out_dir: str | os.PathLike[str],
    *,
    images: int = 64,
    val_images: int | None = None,
    seed: int = 0,
    image_format: ImageFormat = "jpg",
    width: int = 640,
    height: int = 480,
    classes: int = 3,
    jpeg_quality: int = 90,
    workers: int | None = None,
    progress: Progress | None = None,
    force: bool = False,
) -> ClassifyDatasetInfo:
    """Write a synthetic classification dataset to ``out_dir``: ``train/<class>/`` and ``val/<class>/`` folders, one
    per class (named as ``class_names``), every one created even where too few images leave it empty.

    ``val_images`` defaults to ``max(classes, images // 5)``, so that every class has validation images. Image ``i``
    of a split is of class ``i % classes``. The other options, the refusals and ``force`` are ``make_dataset``'s.
    """
    started = time.perf_counter()
    n_val = max(classes, images // 5) if val_images is None else val_images
    _validate(images, n_val, seed, CLASSIFY, image_format, width, height, classes, (1, 1), jpeg_quality, workers)
    root = Path(out_dir).expanduser().resolve()
    spec = _Spec(
        root=str(root), seed=int(seed), task=CLASSIFY, image_format=image_format, width=int(width),
        height=int(height), classes=int(classes), objects=(1, 1), jpeg_quality=int(jpeg_quality),
        counts={"train": int(images), "val": int(n_val)},
    )
    _prepare(root, force)
    _write_marker(root, spec, complete=False, total_bytes=0)
    names = tuple(class_names(spec.classes).values())
    for split in SPLITS:
        for name in names:
            (root / split / name).mkdir(parents=True, exist_ok=True)
    n_workers = len(os.sched_getaffinity(0)) if workers is None else workers
    total_bytes = _generate(spec, n_workers, progress)
    _write_marker(root, spec, complete=True, total_bytes=total_bytes)
    return ClassifyDatasetInfo(
        root=root, task=CLASSIFY, image_format=image_format, names=names, train_images=images, val_images=n_val,
        total_bytes=total_bytes, seconds=time.perf_counter() - started,
    )


def _validate(
    images: int, val_images: int, seed: int, task: str, image_format: str, width: int, height: int, classes: int,
    objects: tuple[int, int], jpeg_quality: int, workers: int | None,
) -> None:
    checks = [
        (images >= 1, f"images must be at least 1, got {images}"),
        (val_images >= 1, f"val_images must be at least 1, got {val_images}"),
        (seed >= 0, f"seed must be a non-negative integer, got {seed}"),
        (task in (*TASKS, CLASSIFY), f"task must be one of {', '.join(TASKS)}, got {task!r}"),
        (image_format in FORMATS, f"image_format must be one of {', '.join(FORMATS)}, got {image_format!r}"),
        (width >= 32 and height >= 32, f"width and height must be at least 32 pixels, got {width}x{height}"),
        (classes >= 1, f"classes must be at least 1, got {classes}"),
        (len(objects) == 2 and 0 <= objects[0] <= objects[1], f"objects must be (min, max), 0 <= min <= max, "
                                                                f"got {objects}"),
        (1 <= jpeg_quality <= 100, f"jpeg_quality must be in 1..100, got {jpeg_quality}"),
        (workers is None or workers >= 1, f"workers must be at least 1, got {workers}"),
    ]
    for ok, message in checks:
        if not ok:
            raise ValueError(message)


def _prepare(root: Path, force: bool) -> None:
    """Refuse to touch user files; with ``force``, remove what an earlier ``make_dataset`` wrote."""
    if root.exists() and not root.is_dir():
        raise FileExistsError(f"{root} exists and is not a directory; refusing to write a dataset there.")
    if not root.exists() or not any(root.iterdir()):
        root.mkdir(parents=True, exist_ok=True)
        return
    if not (root / MARKER).is_file():
        raise FileExistsError(
            f"{root} is not empty and was not made by yolodoctor; refusing to write a dataset into it.")
    if not force:
        raise FileExistsError(f"{root} already holds a yolodoctor dataset; pass force=True to replace it.")
    for name in ("images", "labels", *SPLITS):  # SPLITS: a classification dataset's class folders
        _remove(root / name)
    for path in [root / "data.yaml", root / MARKER, *root.glob("*.cache")]:
        _remove(path)


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def _write_marker(root: Path, spec: _Spec, *, complete: bool, total_bytes: int) -> None:
    """The marker is written first (``complete: false``, no counts) and rewritten when the dataset is whole."""
    marker = {
        "tool": "yolodoctor",
        "kind": "synthetic-dataset",
        "complete": complete,
        "seed": spec.seed,
        "options": spec.options(),
        "counts": dict(spec.counts) if complete else {},
        "total_bytes": total_bytes,
    }
    (root / MARKER).write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _write_yaml(root: Path, spec: _Spec) -> Path:
    lines = [
        "# Synthetic dataset written by yolodoctor (make-dataset); deterministic by seed.",
        f"path: {json.dumps(str(root))}",
        "train: images/train",
        "val: images/val",
    ]
    if spec.task == "pose":
        lines += [f"kpt_shape: [{len(KEYPOINTS)}, 3]", f"flip_idx: [{', '.join(map(str, FLIP_IDX))}]",
                  f"# keypoints: {', '.join(KEYPOINTS)}"]
    lines.append("names:")
    lines += [f"  {i}: {name}" for i, name in class_names(spec.classes).items()]
    path = root / "data.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# ----------------------------------------------------------------------------------------------------------
# Parallel generation
# ----------------------------------------------------------------------------------------------------------

_Chunk = tuple[str, int, int]  # split, start, stop


def _chunks(spec: _Spec, workers: int) -> list[_Chunk]:
    total = sum(spec.counts.values())
    size = max(1, min(64, math.ceil(total / (workers * 8))))
    return [(split, start, min(start + size, spec.counts[split]))
            for split in SPLITS for start in range(0, spec.counts[split], size)]


def _generate(spec: _Spec, workers: int, progress: Progress | None) -> int:
    total = sum(spec.counts.values())
    chunks = _chunks(spec, workers)
    done = 0
    written = 0
    if progress:
        progress(0, total)
    for count, nbytes in _run_chunks(spec, chunks, workers if total >= _IN_PROCESS_BELOW else 1):
        done += count
        written += nbytes
        if progress:
            progress(done, total)
    return written


def _run_chunks(spec: _Spec, chunks: list[_Chunk], workers: int) -> Iterator[tuple[int, int]]:
    if workers <= 1 or len(chunks) <= 1:
        previous = cv2.getNumThreads()
        cv2.setNumThreads(1)
        try:
            for chunk in chunks:
                yield _render_chunk(spec, chunk)
        finally:
            cv2.setNumThreads(previous)
        return
    method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
    with cf.ProcessPoolExecutor(max_workers=min(workers, len(chunks)), mp_context=mp.get_context(method),
                                initializer=_init_worker) as pool:
        futures = [pool.submit(_render_chunk, spec, chunk) for chunk in chunks]
        try:
            for future in cf.as_completed(futures):
                yield future.result()
        except BaseException:
            for future in futures:
                future.cancel()
            raise


def _init_worker() -> None:
    cv2.setNumThreads(1)


def _render_chunk(spec: _Spec, chunk: _Chunk) -> tuple[int, int]:
    split, start, stop = chunk
    root = Path(spec.root)
    written = 0
    for index in range(start, stop):
        written += _write_sample(spec, root, split, index)
    return stop - start, written


def _write_sample(spec: _Spec, root: Path, split: str, index: int) -> int:
    rng_seed = np.random.SeedSequence(spec.seed, spawn_key=(SPLITS.index(split), index))
    if spec.task == CLASSIFY:
        cls = index % spec.classes
        data = _encode(render_class_image(rng_seed, spec.width, spec.height, cls), spec.image_format,
                       spec.jpeg_quality)
        folder = root / split / class_names(spec.classes)[cls]
        (folder / f"{index:0{spec.name_width}d}.{spec.image_format}").write_bytes(data)
        return len(data)
    image, rows = render_image(rng_seed, spec.width, spec.height, spec.task, spec.classes, spec.objects)
    name = f"{index:0{spec.name_width}d}"
    data = _encode(image, spec.image_format, spec.jpeg_quality)
    (root / "images" / split / f"{name}.{spec.image_format}").write_bytes(data)
    text = "".join(row + "\n" for row in rows)
    (root / "labels" / split / f"{name}.txt").write_text(text, encoding="ascii")
    return len(data) + len(text)


def _encode(image: np.ndarray, image_format: str, jpeg_quality: int) -> bytes:
    if image_format == "png":
        ok, buf = cv2.imencode(".png", image, [cv2.IMWRITE_PNG_COMPRESSION, _PNG_COMPRESSION])
    else:
        ok, buf = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, jpeg_quality])
    if not ok:
        raise RuntimeError(f"OpenCV could not encode a {image.shape[1]}x{image.shape[0]} {image_format} image")
    return buf.tobytes()


# ----------------------------------------------------------------------------------------------------------
# Rendering one image
# ----------------------------------------------------------------------------------------------------------


def render_image(
    seed: np.random.SeedSequence | int, width: int, height: int, task: str = "detect", classes: int = 3,
    objects: tuple[int, int] = (2, 6),
) -> tuple[np.ndarray, list[str]]:
    """Render one BGR image and its label rows (Ultralytics format for ``task``) from ``seed``."""
    seq = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    bg_seq, obj_seq, noise_seq = seq.spawn(3)
    image = _background(np.random.default_rng(bg_seq), width, height)
    placed = _draw_objects(np.random.default_rng(obj_seq), image, task, classes, objects)
    _add_noise(np.random.default_rng(noise_seq), image)
    rows = _label_rows(placed, task, width, height)
    return image, rows


def render_class_image(seed: np.random.SeedSequence | int, width: int, height: int, cls: int) -> np.ndarray:
    """Render one BGR classification image of class ``cls``: the background of ``render_image`` with one large shape
    of the class (its texture too, beyond the first len(SHAPES) classes) and sensor noise."""
    seq = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    bg_seq, obj_seq, noise_seq = seq.spawn(3)
    image = _background(np.random.default_rng(bg_seq), width, height)
    short = min(width, height)
    rng = np.random.default_rng(obj_seq)
    obj = _place(rng, cls, (width, height), (short * 0.2, short * 0.4), CLASSIFY, [])
    if obj is not None:
        _paint(rng, image, obj)
    _add_noise(np.random.default_rng(noise_seq), image)
    return image


def _background(rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    """Colour gradient + fractal value noise (light and shade, some tint) + blurred blobs, upsampled."""
    w, h = max(8, width // _BG_SCALE), max(8, height // _BG_SCALE)
    c0, c1 = rng.uniform(30, 225, size=(2, 3)).astype(np.float32)
    angle = rng.uniform(0, 2 * np.pi)
    ramp = (np.linspace(0, np.cos(angle), w, dtype=np.float32)[None, :]
            + np.linspace(0, np.sin(angle), h, dtype=np.float32)[:, None])
    ramp = (ramp - ramp.min()) / max(float(np.ptp(ramp)), 1e-6)
    base = c0 + ramp[..., None] * (c1 - c0)
    shade = _value_noise(rng, w, h, channels=1, amplitude=float(rng.uniform(25, 45)), persistence=0.7)
    tint = _value_noise(rng, w, h, channels=3, amplitude=float(rng.uniform(8, 20)), persistence=0.5, octaves=4)
    base += shade + tint
    base += _blobs(rng, w, h)
    small = np.clip(base, 0, 255).astype(np.uint8)
    return cv2.resize(small, (width, height), interpolation=cv2.INTER_LINEAR)


def _value_noise(
    rng: np.random.Generator, w: int, h: int, *, channels: int, amplitude: float, persistence: float,
    octaves: int = 32,
) -> np.ndarray:
    """Fractal value noise (h x w x channels): a coarse random grid refined octave by octave up to w x h."""
    gw, gh = 3, 3
    field: np.ndarray = rng.normal(0, amplitude, size=(gh, gw, channels)).astype(np.float32)
    for _ in range(1, octaves):
        if gw >= w and gh >= h:
            break
        amplitude *= persistence
        gw, gh = min(w, gw * 2), min(h, gh * 2)
        field = cv2.resize(field, (gw, gh), interpolation=cv2.INTER_CUBIC).reshape(gh, gw, channels)
        field += rng.normal(0, amplitude, size=(gh, gw, channels)).astype(np.float32)
    return cv2.resize(field, (w, h), interpolation=cv2.INTER_CUBIC).reshape(h, w, channels)


def _blobs(rng: np.random.Generator, w: int, h: int) -> np.ndarray:
    canvas = np.zeros((h, w, 3), np.float32)
    for _ in range(int(rng.integers(2, 9))):
        centre = (int(rng.integers(0, w)), int(rng.integers(0, h)))
        axes = (int(rng.integers(2, max(3, w // 4))), int(rng.integers(2, max(3, h // 4))))
        colour = tuple(float(c) for c in rng.uniform(-70, 70, size=3))
        cv2.ellipse(canvas, centre, axes, float(rng.uniform(0, 180)), 0, 360, colour, -1)
    sigma = max(1.0, min(w, h) / 25)
    return cv2.GaussianBlur(canvas, (0, 0), sigma)


def _add_noise(rng: np.random.Generator, image: np.ndarray) -> None:
    """Add Gaussian sensor noise in place, saturating at 0 and 255 (random bytes mapped through a quantile table)."""
    sigma = round(float(rng.uniform(5.0, 7.5)) * 4) / 4
    words = rng.bit_generator.random_raw(-(-image.size // 8))  # raw 64-bit draws: 8x faster than rng.bytes
    raw = np.asarray(words, dtype=np.uint64).view(np.uint8)[:image.size].reshape(image.shape)
    noise = cv2.LUT(raw, _noise_table(sigma))  # int8
    cv2.add(image, noise, dst=image, dtype=cv2.CV_8U)


@functools.lru_cache(maxsize=64)
def _noise_table(sigma: float) -> np.ndarray:
    """int8 lookup table mapping a uniform byte to a N(0, sigma) sample (256 quantiles)."""
    quantiles = [NormalDist(0, sigma).inv_cdf((i + 0.5) / 256) for i in range(256)]
    return np.clip(np.round(quantiles), -127, 127).astype(np.int8)


# ----------------------------------------------------------------------------------------------------------
# Objects
# ----------------------------------------------------------------------------------------------------------


def _draw_objects(
    rng: np.random.Generator, image: np.ndarray, task: str, classes: int, objects: tuple[int, int],
) -> list[_Object]:
    height, width = image.shape[:2]
    wanted = int(rng.integers(objects[0], objects[1] + 1))
    short = min(width, height)
    r_max = short * min(0.3, 0.6 / math.sqrt(max(wanted, 1)))
    r_min = min(max(_MIN_SIDE_PX, short * 0.035), r_max / 2)
    taken: list[tuple[int, int, int, int]] = []
    placed: list[_Object] = []
    for _ in range(wanted):
        cls = int(rng.integers(0, classes))
        obj = _place(rng, cls, (width, height), (r_min, r_max), task, taken)
        if obj is None:
            continue
        _paint(rng, image, obj)
        taken.append((obj.x0, obj.y0, obj.x0 + obj.mask.shape[1], obj.y0 + obj.mask.shape[0]))
        placed.append(obj)
    return placed


def _place(
    rng: np.random.Generator, cls: int, size: tuple[int, int], radii: tuple[float, float], task: str,
    taken: list[tuple[int, int, int, int]],
) -> _Object | None:
    """Find a spot for one object that overlaps no other; shrink it after each failed attempt."""
    width, height = size
    shape = SHAPES[cls % len(SHAPES)]
    inside = shape in _NON_CONVEX or task == "obb"  # only convex shapes may be cut by the border
    shrink = 1.0
    for _ in range(_PLACEMENT_ATTEMPTS):
        radius = math.exp(rng.uniform(math.log(radii[0]), math.log(radii[1]))) * shrink  # log-uniform size
        shrink *= 0.94
        pts = _shape_points(rng, shape, radius)
        margin = 1.0 if inside else -0.35 * radius
        cx = _centre(rng, pts[:, 0].min(), pts[:, 0].max(), width, margin)
        cy = _centre(rng, pts[:, 1].min(), pts[:, 1].max(), height, margin)
        if cx is None or cy is None:
            continue
        obj = _rasterise(cls, pts + np.array((cx, cy)), width, height)
        if obj is not None and not _overlaps(obj, taken) and _fits(obj, task, width, height):
            return obj
    return None


def _centre(rng: np.random.Generator, lo: float, hi: float, size: int, margin: float) -> float | None:
    """A centre coordinate keeping the extent [lo, hi] within ``margin`` of the image (negative: may stick out)."""
    first, last = margin - lo, size - 1 - margin - hi
    return float(rng.uniform(first, last)) if last > first else None


def _shape_points(rng: np.random.Generator, shape: str, radius: float) -> np.ndarray:
    """Polygon (N x 2, float, centred on 0) of a shape with half-extent about ``radius``."""
    aspect = rng.uniform(0.55, 1.0)
    angle = rng.uniform(0, 2 * np.pi)
    if shape == "disc":
        t = np.linspace(0, 2 * np.pi, int(np.clip(radius, 24, 180)), endpoint=False)
        pts = np.stack([np.cos(t), aspect * np.sin(t)], axis=1)
    elif shape in ("box", "plank"):
        a = aspect if shape == "box" else rng.uniform(0.18, 0.35)
        pts = np.array([[-1, -a], [1, -a], [1, a], [-1, a]], float)
        angle = 0.0 if shape == "box" else angle
    elif shape == "star":
        k = int(rng.integers(5, 8))
        t = np.linspace(0, 2 * np.pi, 2 * k, endpoint=False)
        r = np.where(np.arange(2 * k) % 2 == 0, 1.0, rng.uniform(0.4, 0.6))
        pts = np.stack([r * np.cos(t), r * np.sin(t)], axis=1)
    elif shape in ("triangle", "hexagon"):
        k = 3 if shape == "triangle" else 6
        t = np.linspace(0, 2 * np.pi, k, endpoint=False) + rng.uniform(-0.15, 0.15, size=k)
        pts = np.stack([np.cos(t), aspect * np.sin(t)], axis=1)
    elif shape == "cross":
        a = rng.uniform(0.25, 0.4)
        pts = np.array([[-a, -1], [a, -1], [a, -a], [1, -a], [1, a], [a, a], [a, 1], [-a, 1], [-a, a], [-1, a],
                        [-1, -a], [-a, -a]], float)
    else:  # diamond
        pts = np.array([[0, -1], [aspect, 0], [0, 1], [-aspect, 0]], float)
        angle = 0.0
    rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    return (pts @ rot.T) * radius


def _rasterise(cls: int, pts: np.ndarray, width: int, height: int) -> _Object | None:
    """Draw the polygon (anti-aliased, clipped to the image) and crop the mask to its drawn pixels."""
    x0 = max(0, math.floor(pts[:, 0].min()) - 1)
    y0 = max(0, math.floor(pts[:, 1].min()) - 1)
    x1 = min(width, math.ceil(pts[:, 0].max()) + 2)
    y1 = min(height, math.ceil(pts[:, 1].max()) + 2)
    if x1 - x0 < _MIN_SIDE_PX or y1 - y0 < _MIN_SIDE_PX:
        return None
    mask = np.zeros((y1 - y0, x1 - x0), np.uint8)
    fixed = np.round((pts - (x0, y0)) * 16).astype(np.int32)
    cv2.fillPoly(mask, [fixed], 255, lineType=cv2.LINE_AA, shift=4)
    bx, by, bw, bh = cv2.boundingRect(mask)
    if bw < _MIN_SIDE_PX or bh < _MIN_SIDE_PX:
        return None
    return _Object(cls, x0 + bx, y0 + by, np.ascontiguousarray(mask[by:by + bh, bx:bx + bw]))


def _overlaps(obj: _Object, taken: list[tuple[int, int, int, int]]) -> bool:
    x0, y0 = obj.x0 - _GAP_PX, obj.y0 - _GAP_PX
    x1, y1 = obj.x0 + obj.mask.shape[1] + _GAP_PX, obj.y0 + obj.mask.shape[0] + _GAP_PX
    return any(x0 < tx1 and tx0 < x1 and y0 < ty1 and ty0 < y1 for tx0, ty0, tx1, ty1 in taken)


def _fits(obj: _Object, task: str, width: int, height: int) -> bool:
    """OBB corners of the drawn shape must stay inside the image."""
    if task != "obb":
        return True
    corners = _obb_corners(obj)
    return bool(np.all(corners >= 0) and np.all(corners[:, 0] <= width) and np.all(corners[:, 1] <= height))


def _paint(rng: np.random.Generator, image: np.ndarray, obj: _Object) -> None:
    """Alpha-blend a textured fill through the object's anti-aliased mask."""
    h, w = obj.mask.shape
    roi = image[obj.y0:obj.y0 + h, obj.x0:obj.x0 + w]
    texture = _texture(rng, w, h, _contrasting_colour(rng, roi), _class_texture(obj.cls))
    alpha = obj.mask.astype(np.float32)
    alpha *= 1 / 255
    roi[...] = cv2.blendLinear(texture, roi, alpha, 1 - alpha)


def _contrasting_colour(rng: np.random.Generator, roi: np.ndarray) -> np.ndarray:
    mean = np.array(cv2.mean(roi)[:3])
    colour = rng.uniform(0, 255, size=3)
    for _ in range(8):
        if np.abs(colour - mean).sum() > 150:
            break
        colour = rng.uniform(0, 255, size=3)
    return colour


def _texture(rng: np.random.Generator, w: int, h: int, colour: np.ndarray, kind: int | None) -> np.ndarray:
    """A h x w x 3 uint8 texture between ``colour`` and a second colour, of kind ``TEXTURES[kind]`` (None: random).

    The pattern is a uint8 field ``t`` (0..255) mapped through a two-colour palette, all in integer OpenCV ops.
    """
    second = np.clip(colour + rng.uniform(-90, 90, size=3), 0, 255)
    drawn = int(rng.integers(0, len(TEXTURES)))
    kind = drawn if kind is None else kind
    angle = rng.uniform(0, np.pi)
    t: np.ndarray
    if kind == 0:
        t = np.full((h, w), 50, np.uint8)
    elif kind == 1:  # stripes: a phase that wraps around mod 256, through a sine table
        period = rng.uniform(4, max(5.0, min(w, h) / 3))
        t = cv2.LUT(_phase(w, h, angle, 256 / period), _SINE)
    elif kind == 2:  # checks
        cell = int(rng.integers(3, max(4, min(w, h) // 3)))
        cols = ((np.arange(w) // cell) & 1).astype(np.uint8)
        rows = ((np.arange(h) // cell) & 1).astype(np.uint8)
        t = np.bitwise_xor(rows[:, None], cols[None, :]) * np.uint8(255)
    elif kind == 3:  # linear gradient across the object
        t = _phase(w, h, angle, 255 / (w * abs(math.cos(angle)) + h * math.sin(angle) + 1), wrap=False)
    else:  # mottled: coarse random values, smoothly upsampled
        small = rng.integers(0, 256, size=(max(2, h // 8), max(2, w // 8)), dtype=np.uint8)
        t = cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)
    ramp = np.linspace(0, 1, 256)[:, None]
    palette = np.round(colour + ramp * (second - colour)).astype(np.uint8).reshape(256, 1, 3)
    return cv2.LUT(cv2.cvtColor(np.ascontiguousarray(t), cv2.COLOR_GRAY2BGR), palette)


_SINE = np.round(127.5 + 127.5 * np.sin(np.arange(256) * (2 * np.pi / 256))).astype(np.uint8)


def _phase(w: int, h: int, angle: float, scale: float, *, wrap: bool = True) -> np.ndarray:
    """uint8 field ``(x cos a + y sin a) * scale``, wrapping mod 256 (or shifted to start at 0 without ``wrap``)."""
    dx = np.arange(w) * (math.cos(angle) * scale)
    dy = np.arange(h) * (math.sin(angle) * scale)
    if not wrap:
        dx -= min(dx.min(), dx.max())
    return np.add(_wrap8(dy)[:, None], _wrap8(dx)[None, :])  # uint8 addition wraps mod 256


def _wrap8(values: np.ndarray) -> np.ndarray:
    return (np.round(values).astype(np.int64) & 255).astype(np.uint8)


# ----------------------------------------------------------------------------------------------------------
# Labels, measured on the drawn masks
# ----------------------------------------------------------------------------------------------------------


def _label_rows(objects: list[_Object], task: str, width: int, height: int) -> list[str]:
    rows: list[str] = []
    for obj in objects:
        values = _label_values(obj, task, width, height)
        row = " ".join([str(obj.cls), *map(_format, values)])
        if row not in rows:
            rows.append(row)
    return rows


def _format(value: float | int) -> str:
    """Coordinates are clipped to [0, 1] with 6 decimals; integers (keypoint visibility) stay integers."""
    return str(value) if isinstance(value, int) else f"{min(max(value, 0.0), 1.0):.6f}"


def _label_values(obj: _Object, task: str, width: int, height: int) -> list[float | int]:
    scale = np.array([width, height], np.float64)
    if task == "segment":
        return [float(v) for v in (_outline(obj) / scale).ravel()]
    if task == "obb":
        return [float(v) for v in (_obb_corners(obj) / scale).ravel()]
    h, w = obj.mask.shape
    values: list[float | int] = [(obj.x0 + w / 2) / width, (obj.y0 + h / 2) / height, w / width, h / height]
    if task == "pose":
        values += [v for x, y in _keypoints(obj) / scale for v in (float(x), float(y), 2)]
    return values


def _contour(obj: _Object) -> np.ndarray:
    """Outer contour of the drawn pixels, as pixel-centre coordinates in the image (N x 2, float)."""
    contours, _ = cv2.findContours((obj.mask > 0).astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
    contour = max(contours, key=len)
    return contour.reshape(-1, 2).astype(np.float64) + np.array((obj.x0 + 0.5, obj.y0 + 0.5))


def _outline(obj: _Object) -> np.ndarray:
    """Polygon (>= 3 vertices, continuous pixel coordinates) of the object's outline."""
    contours, _ = cv2.findContours((obj.mask > 0).astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    contour = max(contours, key=len)
    poly = cv2.approxPolyDP(contour, 0.7, closed=True).reshape(-1, 2)
    if len(poly) < 3:
        poly = contour.reshape(-1, 2)
    if len(poly) < 3:
        h, w = obj.mask.shape
        poly = np.array([[0, 0], [w - 1, 0], [w - 1, h - 1], [0, h - 1]])
    return poly.astype(np.float64) + np.array((obj.x0 + 0.5, obj.y0 + 0.5))


def _obb_corners(obj: _Object) -> np.ndarray:
    """Minimum-area rotated rectangle around the drawn pixels (their full area), 4 x 2, image coordinates."""
    (cx, cy), (rw, rh), angle = cv2.minAreaRect(_contour(obj).astype(np.float32))
    return cv2.boxPoints(((cx, cy), (rw + 1, rh + 1), angle)).astype(np.float64)


def _keypoints(obj: _Object) -> np.ndarray:
    """Top, right, bottom, left extreme points of the drawn shape, then its centroid (5 x 2)."""
    pts = _contour(obj)
    extremes = [pts[pts[:, 1].argmin()], pts[pts[:, 0].argmax()], pts[pts[:, 1].argmax()], pts[pts[:, 0].argmin()]]
    m = cv2.moments(obj.mask)
    centre = np.array([m["m10"] / m["m00"] + obj.x0 + 0.5, m["m01"] / m["m00"] + obj.y0 + 0.5])
    return np.array([*extremes, centre])
