"""Classification datasets for ``yolodoctor check``: a folder of class folders, read as Ultralytics 8.4 reads it.

A classification training takes ``data=FOLDER`` (``FOLDER/train/<class>/*.jpg``, ``FOLDER/val/<class>/*.jpg``), not a
data.yaml. This module finds what Ultralytics 8.4.190 would make of such a folder, without importing it (no torch,
no ultralytics), downloading, unpacking, copying or rewriting anything:

- the layout, as ``check_cls_dataset`` (ultralytics/data/utils.py) reads it: ``train/`` (else the images of the
  first-level folders are copied 80/20 into a new ``FOLDER_split/`` by ``split_classify_dataset``,
  ultralytics/data/split.py, which :func:`split_plan` repeats without copying); the validation folder (``val/``,
  ``validation/``, ``valid/``, else ``test/``, else none, where ClassificationTrainer crashes building its loader); the
  class names (every folder in ``train/``, empty ones included: they count in ``nc``);
- the images each split holds, as ``torchvision.datasets.ImageFolder`` (under ``ClassificationDataset``,
  ultralytics/data/dataset.py) lists them: files with an IMG_FORMATS extension inside a class folder, searched
  recursively; others are ignored; val folders that are not train classes are dropped (or, with no train class among
  them, kept in their own order);
- every image, by labels.check_image (as ``verify_image`` / ``check_image`` in ultralytics/data/utils.py judge it),
  through dataset.py's process pool, with its decoded size: ``cache='ram'`` holds every train and val image decoded
  at full resolution, ``cache='disk'`` writes the same bytes as a ``.npy`` beside each image;
- what Ultralytics writes into the user's folder: ``FOLDER/train.cache`` and ``FOLDER/val.cache`` (its scan of the
  images, ``verify_images``), and with ``cache='disk'`` a ``.npy`` per image.

The facts (``dataset.cls.*`` and the dataset.* counts detection has too) are judged by the DS12x and DS13x rules;
``dataset.defects`` holds the per-file verdicts in detection's shape, so the per-image rules (DS105-DS108) apply.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yolodoctor.check import labels as L
from yolodoctor.check.datayaml import datasets_dir, exists, is_dir

# check_cls_dataset: the folders tried for validation, in order (then test/)
VAL_NAMES = ("val", "validation", "valid")
TRAIN_RATIO = 0.8  # split_classify_dataset's default, as check_cls_dataset calls it
ARCHIVES = (".zip", ".tar", ".gz", ".tgz", ".xz", ".bz2", ".txz", ".tbz2")  # check_cls_dataset unpacks these
NPY_HEADER = 128  # bytes numpy.save writes before a uint8 image array
MAX_NAMES = 10  # class folders written out in a fact; the rest counted


class NotClassification(ValueError):
    """data= cannot be read as a classification folder; the message is one sentence (check exits 2 with it)."""


# --------------------------------------------------------------------------------------------------------------------
# where the folder is


def locate(data: str | Path) -> Path:
    """The folder ``check_cls_dataset`` would read for ``data=``: a folder, or a bare name under Ultralytics'
    DATASETS_DIR. A URL, an archive, a file or a name that is not there raises NotClassification (Ultralytics would
    download, unpack or refuse it; check does none of that)."""
    text = os.fspath(data)
    if text.lower().startswith(("http:/", "https:/")):
        raise NotClassification(f"data={text} is a URL: check never downloads datasets; download and unpack it, then "
                                "pass the folder")
    p = Path(text).expanduser()
    if is_dir(p):
        return _absolute(p)
    if text.lower().endswith(ARCHIVES):
        raise NotClassification(f"data={text} is an archive: check does not unpack it (Ultralytics would, into "
                                "its datasets folder); unpack it and pass the folder")
    if exists(p):
        raise NotClassification(f"data={text} is a file, but a classification training takes a folder of class "
                                "folders (train/<class>/*.jpg); Ultralytics refuses a file here")
    under = datasets_dir() / p
    if not p.is_absolute() and is_dir(under):
        return _absolute(under)
    raise NotClassification(f"data={text}: no such folder" + ("" if p.suffix else
                            f" here or in Ultralytics' datasets folder {datasets_dir()} (Ultralytics would try to "
                            "download it; check never downloads datasets)"))


def _absolute(p: Path) -> Path:
    try:
        return p.resolve()
    except (OSError, RuntimeError):
        return Path(os.path.abspath(p))


def _subdirs(d: Path) -> list[str]:
    """Names of the folders in ``d`` (hidden ones included), sorted: ImageFolder's find_classes."""
    try:
        with os.scandir(d) as it:
            return sorted(e.name for e in it if _entry_is_dir(e))
    except OSError:
        return []


def _entry_is_dir(e: os.DirEntry) -> bool:
    try:
        return e.is_dir()
    except OSError:
        return False


def _is_image_name(name: str) -> bool:
    """ClassificationDataset's is_valid_file: the text after the last dot, lower-cased, is an IMG_FORMATS name."""
    return name.rpartition(".")[2].lower() in L.IMG_FORMATS


def looks_like_classification(folder: Path, probe: int = 64) -> bool:
    """A folder a classification training would take: ``train/`` with class folders in it, or class folders holding
    images. A detection layout (images/ and labels/ folders) is not one."""
    train = folder / "train"
    if is_dir(train):
        classes = set(_subdirs(train))
        return bool(classes) and not classes <= {"images", "labels"}
    for name in _subdirs(folder)[:probe]:
        if name in ("images", "labels"):
            continue
        try:
            with os.scandir(folder / name) as it:
                for i, e in enumerate(it):
                    if i >= probe:
                        break
                    if _is_image_name(e.name) and e.is_file():
                        return True
        except OSError:
            continue
    return False


# --------------------------------------------------------------------------------------------------------------------
# what each split holds


@dataclass
class Split:
    """One split folder as ImageFolder lists it."""

    name: str
    path: Path
    classes: list[str]  # its class folders, sorted (empty ones included)
    samples: list[tuple[str, str]]  # (image file, class folder), in ImageFolder's order
    ignored: list[tuple[str, str]] = field(default_factory=list)  # (file, why Ultralytics does not read it)


def _walk(top: str) -> list[tuple[str, list[str]]]:
    """(folder, file names) under ``top`` as ``sorted(os.walk(top, followlinks=True))`` gives them, each real folder
    once (a folder link back up the tree would make os.walk loop)."""
    out: list[tuple[str, list[str]]] = []
    seen: set[str] = set()
    for root, dirs, files in os.walk(top, followlinks=True):
        real = os.path.realpath(root)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        out.append((root, files))
    out.sort()
    return out


def _not_read(name: str) -> bool:
    """A file worth naming among those Ultralytics ignores: not hidden, not its own .npy disk cache."""
    return not name.startswith(".") and not name.endswith(".npy")


def scan_split(name: str, path: Path) -> Split:
    classes = _subdirs(path)
    split = Split(name, path, classes, [])
    try:
        with os.scandir(path) as it:
            loose = sorted(e.name for e in it if not _entry_is_dir(e))
    except OSError:
        loose = []
    for f in loose:
        if _is_image_name(f):
            split.ignored.append((str(path / f), "an image outside the class folders (Ultralytics reads none there)"))
    for c in classes:
        for root, files in _walk(os.path.join(path, c)):
            for f in sorted(files):
                full = os.path.join(root, f)
                if _is_image_name(f):
                    split.samples.append((full, c))
                elif _not_read(f):
                    ext = f.rpartition(".")[2].lower() if "." in f else ""
                    why = f".{ext} is not an image format Ultralytics reads" if ext else "no file extension"
                    split.ignored.append((full, why))
    return split


def split_plan(folder: Path) -> tuple[Split, Split]:
    """What ``split_classify_dataset`` (ultralytics/data/split.py) would copy into ``FOLDER_split/train`` and ``/val``:
    per first-level folder (empty ones too), its images sorted, shuffled by ``random.Random(0)``, the first 80% to
    train. The images are named by where they are now (nothing is copied)."""
    dest = Path(f"{folder}_split")
    train = Split("train", dest / "train", [], [])
    val = Split("val", dest / "val", [], [])
    try:
        class_dirs = [d for d in folder.iterdir() if d.is_dir()]
    except OSError:
        class_dirs = []
    for d in class_dirs:
        train.classes.append(d.name)
        val.classes.append(d.name)
        try:
            files = sorted(f for f in d.rglob("*.*") if f.suffix[1:].lower() in L.IMG_FORMATS and f.is_file())
        except OSError:
            files = []
        random.Random(0).shuffle(files)
        k = int(len(files) * TRAIN_RATIO)
        train.samples += [(str(f), d.name) for f in files[:k]]
        val.samples += [(str(f), d.name) for f in files[k:]]
    for s in (train, val):
        s.classes.sort()
        s.samples.sort(key=lambda x: (x[1], x[0]))
    return train, val


@dataclass
class Layout:
    """The folder as a classification training would read it."""

    folder: Path  # the folder given
    data_dir: Path  # where train/ and the validation folder are: the folder, or FOLDER_split
    has_train: bool
    names: list[str]  # train's class folders, sorted: the class names (nc = len)
    splits: dict[str, Split]  # train, val (the first of val/validation/valid), test, where present
    validation: Split | None  # the folder the training validates on
    val_fallback: bool  # that is test/, which Ultralytics falls back to with a warning
    val_kept: list[tuple[str, str]]  # the validation images ClassificationDataset keeps (in a train class)
    val_unknown: list[str]  # validation class folders with images that are not train classes
    val_disjoint: bool  # none of the validation folders is a train class: labels follow the folders' own order

    @property
    def split_folder(self) -> Path:
        """Where split_classify_dataset copies a folder without train/."""
        return Path(f"{self.folder}_split")

    @property
    def split_writable(self) -> bool:
        """Whether split_classify_dataset can create (or write into) that folder."""
        return _writable(self.split_folder if is_dir(self.split_folder) else _nearest_existing(self.folder.parent))


def read_layout(folder: Path, split: str = "val") -> Layout:
    """check_cls_dataset's reading of ``folder`` (``split``: the trainer's args.split, 'val' by default)."""
    has_train = is_dir(folder / "train")
    splits: dict[str, Split] = {}
    if has_train:
        data_dir = folder
        splits["train"] = scan_split("train", folder / "train")
        val_name = next((n for n in VAL_NAMES if exists(folder / n)), None)
        if val_name is not None:
            splits["val"] = scan_split(val_name, folder / val_name)
        if exists(folder / "test"):
            splits["test"] = scan_split("test", folder / "test")
    else:
        data_dir = Path(f"{folder}_split")
        splits["train"], splits["val"] = split_plan(folder)
    used: Split | None = splits.get("val")
    fallback = False
    if split == "test":
        used = splits.get("test") or used
    elif used is None and "test" in splits:
        used, fallback = splits["test"], True
    names = splits["train"].classes
    kept, unknown, disjoint = _align(used, names)
    return Layout(folder=folder, data_dir=data_dir, has_train=has_train, names=names, splits=splits,
                  validation=used, val_fallback=fallback, val_kept=kept, val_unknown=unknown, val_disjoint=disjoint)


def _align(val: Split | None, names: list[str]) -> tuple[list[tuple[str, str]], list[str], bool]:
    """ClassificationDataset.__init__'s class index for the validation split (names = the train classes): by name
    where any folder is a train class, and folders the model lacks dropped; else the folders' own order, those past
    nc dropped. Returns (kept samples, dropped folders with images, no folder is a train class)."""
    if val is None:
        return [], [], False
    classes = val.classes
    disjoint = bool(names) and bool(classes) and set(classes).isdisjoint(names)
    index = {c: i for i, c in enumerate(classes)} if disjoint else {n: i for i, n in enumerate(names)}
    nc = len(names)
    extra = {c for c in classes if index.get(c, nc) >= nc} if names else set()
    kept = [s for s in val.samples if s[1] not in extra]
    with_images = {c for _, c in val.samples}
    return kept, sorted(extra & with_images), disjoint and bool(val.samples)


# --------------------------------------------------------------------------------------------------------------------
# per image: labels.check_image, and the decoded size of those Ultralytics keeps


class ClsAgg(L.Agg):
    """labels.Agg plus the bytes each group of images takes decoded (uint8, 3 channels, full resolution)."""

    __slots__ = ("decoded",)

    def __init__(self) -> None:
        super().__init__()
        self.decoded: dict[str, int] = {}

    def merge(self, o: L.Agg) -> None:
        super().merge(o)
        if isinstance(o, ClsAgg):
            for k, v in o.decoded.items():
                self.decoded[k] = self.decoded.get(k, 0) + v


def check_images(args: tuple[list[tuple[int, str, str]], Any]) -> ClsAgg:
    """Pool entry point: check (index, image, group) triples; the decoded bytes of each image Ultralytics keeps (a
    readable image of at least 10 px both ways) are added to its group's."""
    items, _ = args
    agg = ClsAgg()
    for g in range(0, len(items), L.PREFETCH_GROUP):
        group = items[g : g + L.PREFETCH_GROUP]
        L.prefetch(group, labels=False)
        for _, img, key in group:
            agg.n += 1
            if L.check_image(img, agg):  # kept: its size is the last one recorded
                w, h = agg.sizes[-1]
                agg.decoded[key] = agg.decoded.get(key, 0) + w * h * 3
    return agg


# --------------------------------------------------------------------------------------------------------------------
# the facts


def _names(xs: list[str]) -> str:
    """Folder names for a message: the first MAX_NAMES, then how many more."""
    text = ", ".join(xs[:MAX_NAMES])
    return text + (f" and {len(xs) - MAX_NAMES} more" if len(xs) > MAX_NAMES else "")


def _writable(d: Path) -> bool:
    try:
        return os.access(d, os.W_OK)
    except (OSError, ValueError):
        return False


def _nearest_existing(p: Path) -> Path:
    while not exists(p) and p != p.parent:
        p = p.parent
    return p


def layout_facts(lay: Layout) -> dict[str, Any]:
    """The facts of the layout (no image opened)."""
    f: dict[str, Any] = {}
    train, val = lay.splits["train"], lay.splits.get("val")
    f["dataset.cls.folder"] = str(lay.folder)
    f["dataset.cls.has_train"] = lay.has_train
    f["dataset.cls.split_folder"] = str(lay.split_folder)
    f["dataset.cls.split_writable"] = lay.split_writable
    used = lay.validation
    f["dataset.cls.val_split"] = used.name if used is not None else "none"
    f["dataset.cls.val_fallback"] = lay.val_fallback
    f["dataset.classes"] = len(lay.names)
    f["dataset.cls.names"] = list(lay.names)
    f["dataset.cls.train_classes"] = _names(lay.names)
    f["dataset.cls.val_classes"] = _names(used.classes) if used is not None else ""
    per_class = {c: 0 for c in lay.names}
    for _, c in train.samples:
        per_class[c] += 1
    f["dataset.cls.train_per_class"] = per_class
    empty = [c for c, n in per_class.items() if n == 0]
    f["dataset.cls.empty_classes"] = _names(empty)
    f["dataset.cls.empty_class_count"] = len(empty)
    f["dataset.cls.val_unknown"] = _names(lay.val_unknown)
    f["dataset.cls.val_unknown_count"] = len(lay.val_unknown)
    unknown = set(lay.val_unknown)
    f["dataset.cls.val_unknown_images"] = sum(1 for _, c in (used.samples if used else []) if c in unknown)
    f["dataset.cls.val_disjoint"] = lay.val_disjoint
    f["dataset.cls.val_images_kept"] = len(lay.val_kept)
    in_val = {c for _, c in lay.val_kept}
    missing = [c for c in lay.names if c not in in_val] if lay.val_kept and not lay.val_disjoint else []
    f["dataset.cls.val_missing"] = _names(missing)
    f["dataset.cls.val_missing_count"] = len(missing)
    for name, s in (("train", train), ("val", val), ("test", lay.splits.get("test"))):
        if s is not None:
            f[f"dataset.images.{name}"] = len(s.samples)
    ignored = [x for s in lay.splits.values() for x in s.ignored]
    f["dataset.cls.ignored_files"] = len(ignored)
    f["dataset.cls.ignored_examples"] = [{"file": p, "reason": why} for p, why in ignored[: L.MAX_EXAMPLES]]
    cache_dirs = [train.path] + ([used.path] if used is not None else [])
    f["dataset.cls.cache_files"] = ", ".join(str(Path(d).with_suffix(".cache")) for d in cache_dirs)
    f["dataset.cls.cache_writable"] = _writable(lay.data_dir) if lay.has_train else lay.split_writable
    return f


def disk_cache_facts(lay: Layout, decoded: dict[str, int]) -> dict[str, Any]:
    """What cache='disk' writes: a .npy (the decoded image) beside each train and validation image it keeps; a folder
    that is not writable turns it off (ClassificationDataset.__init__)."""
    f: dict[str, Any] = {}
    files = len(lay.splits["train"].samples) + len(lay.val_kept)
    f["dataset.cls.npy_files"] = files
    f["dataset.cls.npy_bytes"] = decoded.get("train", 0) + decoded.get("val", 0) + NPY_HEADER * files
    if lay.has_train:
        dirs = sorted({os.path.dirname(p) for p, _ in [*lay.splits["train"].samples, *lay.val_kept]})
        locked = [d for d in dirs if not _writable(Path(d))]
    else:  # the copies in FOLDER_split, which Ultralytics creates
        locked = [] if lay.split_writable else [str(lay.data_dir)]
    f["dataset.cls.npy_unwritable"] = len(locked)
    f["dataset.cls.npy_unwritable_dirs"] = _names(locked)
    return f


def image_items(lay: Layout) -> tuple[list[tuple[int, str, str]], dict[str, list[Path]]]:
    """The images to check, each once, as (index, file, group): 'train', 'val' (kept for validation) or 'other'
    (dropped classes, a test folder not used); and each split's image files for the other probes."""
    group: dict[str, str] = {}
    for p, _ in lay.splits["train"].samples:
        group[p] = "train"
    for p, _ in lay.val_kept:
        group.setdefault(p, "val")
    for s in lay.splits.values():
        for p, _ in s.samples:
            group.setdefault(p, "other")
    items = [(i, p, g) for i, (p, g) in enumerate(group.items())]
    return items, {name: [Path(p) for p, _ in s.samples] for name, s in lay.splits.items()}
