"""Per-file dataset checks: one image header and one label file at a time, as Ultralytics 8.4 reads them.

The rules follow ``ultralytics.data.utils.verify_image_label`` / ``check_image`` (8.4.190):

- image: ``PIL.Image.open`` + ``verify()``; EXIF-corrected size must be >= 10 px both ways; the format must be one
  of IMG_FORMATS; a JPEG must end with the EOI marker ``FF D9`` (Ultralytics otherwise re-encodes the file in place);
- label file (UTF-8, BOM allowed): blank lines skipped, each line ``str.split()``; a detect/segment/obb file whose rows
  are longer than 6 columns is a polygon file (``cls x1 y1 x2 y2 ...``, >= 3 points), and may not mix in 5-column
  box rows; pose rows have exactly ``5 + nkpt * ndim`` columns; coordinates must lie within [-0.01, 1.01]; class
  ids must be integers below ``nc``; exact duplicate rows (as float32) are dropped by Ultralytics.

Only header bytes of each image are read (no decode). Nothing here imports torch or ultralytics; the two constants
below are copies, and ``tests/check/test_dataset.py`` asserts they still match Ultralytics' own.
"""

from __future__ import annotations

import math
import os
import sys
import warnings
from array import array
from collections import Counter
from dataclasses import dataclass
from typing import Any, BinaryIO

# Copy of ultralytics.data.utils.IMG_FORMATS (8.4.190).
IMG_FORMATS = frozenset(
    {"avif", "bmp", "dng", "heic", "heif", "jp2", "jpeg", "jpg", "mpo", "png", "tif", "tiff", "webp"}
)
# check_image also accepts PIL's format name "jpeg2000" for .jp2 files.
PIL_FORMATS_OK = IMG_FORMATS | {"jpeg2000"}
MIN_IMAGE_SIDE = 10  # check_image: assert shape > 9 both ways
COORD_TOL = 0.01  # verify_image_label: points.max() <= 1.01, lb.min() >= -0.01
MAX_EXAMPLES = 5


def img2label_paths(img_paths: list[str], label_dir: str = "labels", suffix: str = ".txt") -> list[str]:
    """Copy of ultralytics.data.utils.img2label_paths (8.4.190): the last /images/ becomes /labels/, extension .txt."""
    sa, sb = f"{os.sep}images{os.sep}", f"{os.sep}{label_dir}{os.sep}"
    return [sb.join(os.fspath(x).rsplit(sa, 1)).rsplit(".", 1)[0] + f"{suffix}" for x in img_paths]


# Defect codes: the kinds of dataset.py's dataset.defects items, which the DS1xx and DS2xx rules name.
NO_LABEL = "no_label"
EMPTY_LABEL = "empty_label"
IMG_MISSING = "img_missing"
IMG_EMPTY = "img_empty"
IMG_CORRUPT = "img_corrupt"
JPEG_TRUNCATED = "jpeg_truncated"
IMG_SMALL = "img_small"
LBL_COLUMNS = "lbl_columns"
LBL_PARSE = "lbl_parse"
LBL_CLASS = "lbl_class"
LBL_COORDS = "lbl_coords"
LBL_ZERO = "lbl_zero"
LBL_DUP = "lbl_dup"


@dataclass(frozen=True)
class LabelSpec:
    """How to read label rows for one task."""

    task: str  # detect | segment | pose | obb
    nc: int | None  # number of classes; None when names are unusable (class range not checked)
    kpt: tuple[int, int] | None = None  # (nkpt, ndim) from kpt_shape

    @property
    def pose_cols(self) -> int | None:
        return 5 + self.kpt[0] * self.kpt[1] if self.kpt else None


class Agg:
    """What one chunk (or the whole run) found: defects with counts and examples, and summary numbers."""

    __slots__ = ("bytes", "classes", "defects", "empty", "formats", "instances", "kinds", "missing", "n", "sizes")

    def __init__(self) -> None:
        self.defects: dict[str, list] = {}  # code -> [files, rows, examples]
        self.n = 0
        self.bytes = 0
        self.formats: Counter = Counter()
        self.sizes: list[tuple[int, int]] = []
        self.instances = 0
        self.classes: Counter = Counter()
        self.kinds: Counter = Counter()  # label rows: box | polygon | pose
        self.missing: list[int] = []  # indices of images without a label file
        self.empty: list[int] = []  # indices of images with an empty label file

    def add(self, code: str, rows: int, examples: list[dict]) -> None:
        d = self.defects.get(code)
        if d is None:
            d = self.defects[code] = [0, 0, []]
        d[0] += 1
        d[1] += rows
        room = MAX_EXAMPLES - len(d[2])
        if room > 0:
            d[2].extend(examples[:room])

    def merge(self, o: Agg) -> None:
        for code, (files, rows, ex) in o.defects.items():
            d = self.defects.get(code)
            if d is None:
                d = self.defects[code] = [0, 0, []]
            d[0] += files
            d[1] += rows
            room = MAX_EXAMPLES - len(d[2])
            if room > 0:
                d[2].extend(ex[:room])
        self.n += o.n
        self.bytes += o.bytes
        self.formats.update(o.formats)
        self.sizes.extend(o.sizes)
        self.instances += o.instances
        self.classes.update(o.classes)
        self.kinds.update(o.kinds)
        self.missing.extend(o.missing)
        self.empty.extend(o.empty)


# --------------------------------------------------------------------------------------------------------------------
# images

_heif_tried = False
_FADV_RANDOM = getattr(os, "POSIX_FADV_RANDOM", None) if hasattr(os, "posix_fadvise") else None
_FADV_WILLNEED = getattr(os, "POSIX_FADV_WILLNEED", None) if hasattr(os, "posix_fadvise") else None


def _open_image(f: Any, path: str) -> Any:
    from PIL import Image, UnidentifiedImageError

    global _heif_tried
    # Ultralytics replaces PIL's Image.open (utils/patches.py): on the first file PIL cannot identify it pip-installs
    # pi-heif. check installs nothing: PIL's own open, kept by the patch, where it is in place
    pil_open = getattr(sys.modules.get("ultralytics.utils.patches"), "_image_open", None) or Image.open
    try:
        return pil_open(f)
    except UnidentifiedImageError:
        # Ultralytics registers pi-heif lazily (and pip-installs it when missing); use it only when already installed.
        if _heif_tried or path.rpartition(".")[2].lower() not in ("heic", "heif"):
            raise
        _heif_tried = True
        try:
            from pi_heif import register_heif_opener
        except ImportError:
            raise UnidentifiedImageError(f"cannot identify image file {path!r} (pi-heif is not installed)") from None
        register_heif_opener()
        f.seek(0)
        return pil_open(f)


def _open_image_file(path: str, agg: Agg) -> BinaryIO | None:
    """The image file opened for reading, or None with the reason counted (missing, or cannot be opened)."""
    try:
        return open(path, "rb")
    except FileNotFoundError:
        agg.add(IMG_MISSING, 1, [{"file": path, "reason": "image file does not exist"}])
    except (OSError, ValueError) as e:
        agg.add(IMG_CORRUPT, 1, [{"file": path, "reason": f"cannot open: {_err(e)}"}])
    return None


def check_image(path: str, agg: Agg) -> bool:
    """check_image without the decode: header, verify(), size, format, JPEG EOI marker. True where Ultralytics keeps
    the image (a JPEG without its end marker included: it re-encodes those in place)."""
    ext = path.rpartition(".")[2].lower()
    agg.formats[ext] += 1
    f = _open_image_file(path, agg)
    if f is None:
        return False
    with f:
        try:
            fd = f.fileno()
            size = os.fstat(fd).st_size
            if _FADV_RANDOM is not None and size > 16384:
                # only the header and the last 2 bytes are read: stop the kernel's readahead from pulling in the
                # whole file (on a cold cache that turns a header check into a full read of the dataset)
                os.posix_fadvise(fd, 0, 0, _FADV_RANDOM)
        except OSError:
            size = 0
        agg.bytes += size
        if size == 0:
            agg.add(IMG_EMPTY, 1, [{"file": path, "reason": "0-byte file"}])
            return False
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                im = _open_image(f, path)
                fmt = (im.format or "").lower()
                im.verify()
                w, h = _exif_size(im)
        except Exception as e:
            why = "not an image format PIL recognises" if type(e).__name__ == "UnidentifiedImageError" else _err(e)
            agg.add(IMG_CORRUPT, 1, [{"file": path, "reason": f"PIL cannot read it: {why}"}])
            return False
        if fmt not in PIL_FORMATS_OK:
            agg.add(IMG_CORRUPT, 1, [{"file": path, "reason": f"format {fmt or 'unknown'} is not a training format"}])
            return False
        agg.sizes.append((w, h))
        kept = w >= MIN_IMAGE_SIDE and h >= MIN_IMAGE_SIDE
        if not kept:
            agg.add(IMG_SMALL, 1, [{"file": path, "reason": f"{w}x{h} px; Ultralytics rejects images under 10 px"}])
        if fmt in ("jpeg", "jpg"):
            try:
                f.seek(-2, 2)
                tail = f.read(2)
            except OSError:
                tail = b""
            if tail != b"\xff\xd9":
                decodes = _decodes(f, path)
                then = ("it decodes: Ultralytics re-encodes it in place" if decodes is None
                        else f"it does not decode ({decodes}): Ultralytics drops it")
                agg.add(
                    JPEG_TRUNCATED,
                    1,
                    [{"file": path,
                      "reason": f"no end-of-image marker FFD9 at the end (ends {tail.hex() or '-'}); {then}"}],
                )
                kept = kept and decodes is None
        return kept


def _decodes(f: BinaryIO, path: str) -> str | None:
    """Why the image does not decode whole (None: it does), as PIL's load in Ultralytics' re-encoding of a JPEG
    without its end marker (_exif_jpeg in ultralytics/data/utils.py) finds: a file cut short fails there."""
    try:
        f.seek(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            im = _open_image(f, path)
            im.load()
    except Exception as e:
        return _err(e)
    return None


def _exif_size(im: Any) -> tuple[int, int]:
    """ultralytics.data.utils.exif_size: swap w/h for EXIF orientations 5-8."""
    w, h = im.size
    try:
        exif = im.tag_v2 if im.format == "TIFF" else im.getexif()
        if exif.get(274) in {5, 6, 7, 8}:
            return h, w
    except Exception:
        pass
    return w, h


def _err(e: BaseException) -> str:
    s = str(e) or type(e).__name__
    s = " ".join(s.split())
    return s[:200]


# --------------------------------------------------------------------------------------------------------------------
# labels


def _ex(path: str, lineno: int, line: str, reason: str) -> dict:
    row = line.strip()
    if len(row) > 160:
        row = row[:159] + "…"
    return {"file": path, "line": lineno, "row": row, "reason": reason}


def _read_label_text(path: str, index: int, agg: Agg) -> str | None:
    """The label file's text, or None with what stopped it recorded (no file, unreadable, not UTF-8)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        agg.missing.append(index)
        return None
    except (OSError, ValueError) as e:
        agg.add(LBL_PARSE, 1, [{"file": path, "line": None, "row": None, "reason": f"cannot read: {_err(e)}"}])
        return None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        lineno = raw.count(b"\n", 0, e.start) + 1
        line = raw.splitlines()[lineno - 1] if raw.splitlines() else b""
        agg.add(LBL_PARSE, 1, [_ex(path, lineno, repr(line[:80])[2:-1], "not UTF-8 text")])
        return None


class _Issues:
    """The defective rows of one label file: code -> [rows, examples]."""

    __slots__ = ("by_code", "path")

    def __init__(self, path: str) -> None:
        self.path = path
        self.by_code: dict[str, list] = {}

    def bad(self, code: str, lineno: int, line: str, reason: str) -> None:
        d = self.by_code.get(code)
        if d is None:
            d = self.by_code[code] = [0, []]
        d[0] += 1
        if len(d[1]) < MAX_EXAMPLES:
            d[1].append(_ex(self.path, lineno, line, reason))


@dataclass(frozen=True)
class _FileRules:
    """How the rows of one label file are judged."""

    task: str
    nc: int | None
    kpt: tuple[int, int] | None
    pose_cols: int | None
    polygon_file: bool  # a box task's file with polygon rows: its box rows are dropped with it

    @property
    def keypoint(self) -> bool:
        return self.task == "pose"

    @property
    def ndim(self) -> int:
        return self.kpt[1] if self.kpt else 0


def _parse_row(t: list[str]) -> tuple[list[float] | None, str]:
    """The row's values, or None and why they are not numbers."""
    try:
        vals = [float(x) for x in t]
    except ValueError:
        tok = next((x for x in t if not _is_float(x)), t[0])
        return None, f"{tok[:40]!r} is not a number"
    if not all(map(math.isfinite, vals)):
        return None, "nan or inf value"
    return vals, ""


def _box_columns_problem(n: int, fr: _FileRules) -> str | None:
    """What is wrong with a non-pose row of n columns that is not a polygon row (None: a valid box row)."""
    if n > 6:
        return f"{n} columns: a polygon row is a class and x y pairs (an odd column count)"
    if n == 5:
        if fr.task == "segment":
            return "a 5-column box row in a segment dataset (Ultralytics stops: boxes and segments must match)"
        if fr.task == "obb":
            return "a 5-column box row in an OBB dataset: rows are class x1 y1 x2 y2 x3 y3 x4 y4"
        if fr.polygon_file:
            return "a 5-column box row in a file of polygon rows (Ultralytics drops the whole file)"
        return None
    need = {"segment": "class + at least 3 x y pairs", "obb": "9 (class + 4 corner points)"}.get(fr.task, "5")
    return f"{n} columns; expected {need}"


def _row_kind(n: int, fr: _FileRules) -> tuple[str, str | None]:
    """The row's kind (box, polygon, pose) and what is wrong with its column count (None: nothing)."""
    if fr.keypoint:
        if fr.pose_cols is None:  # kpt_shape unusable (reported on data.yaml): only the class id can be checked
            return "pose", None if n >= 5 else f"{n} columns; pose rows need at least 5"
        assert fr.kpt is not None  # pose_cols comes from it
        why = None if n == fr.pose_cols else f"{n} columns; pose rows need 5 + {fr.kpt[0]}x{fr.ndim} = {fr.pose_cols}"
        return "pose", why
    if n > 6 and n % 2 == 1:
        return "polygon", None
    return "box", _box_columns_problem(n, fr)


def _class_problem(c: float, token: str, nc: int | None) -> str | None:
    """What is wrong with the class id (held as float32, as Ultralytics holds labels)."""
    if c % 1 != 0:
        return f"class id {token} is not an integer"
    if c < 0 or (nc is not None and c >= nc):
        rng = f"0-{nc - 1}" if nc is not None else "0 or more"
        return f"class id {int(c)} outside {rng}"
    return None


def _coords_problem(kind: str, v32: array, ndim: int) -> str | None:
    """Coordinates judged as verify_image_label does: max of the checked points <= 1.01, min >= -0.01 (or >= 0 when
    a width/height is negative); polygons through their bounding box (segments2boxes), pose through the keypoints'
    x y."""
    if kind == "polygon":
        xs, ys = v32[1::2], v32[2::2]
        x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
        box = [(x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0]
        hi, lo, wh = max(box), min(box), 0.0
        what = "the polygon's bounding box"
    else:
        if kind == "pose":
            kp = v32[5:]
            hi = max((v for i, v in enumerate(kp) if i % 3 != 2) if ndim == 3 else kp, default=0.0)
            what = "a keypoint"
        else:
            hi = max(v32[1:5])
            what = "the box"
        lo, wh = min(v32[1:]), min(v32[3], v32[4])
    if hi > 1 + COORD_TOL or lo < -COORD_TOL or (lo < 0 and wh < 0):
        v = hi if hi > 1 + COORD_TOL else lo
        return f"{what} has {v:.4g}, outside 0-1 (coordinates are fractions of image size)"
    return None


def _zero_size_problem(kind: str, vals: list[float], t: list[str]) -> str | None:
    if kind == "polygon":
        xs, ys = vals[1::2], vals[2::2]
        area2 = sum(xs[i - 1] * ys[i] - xs[i] * ys[i - 1] for i in range(len(xs)))
        if area2 == 0 or max(xs) == min(xs) or max(ys) == min(ys):
            return "polygon has zero area"
        return None
    if vals[3] == 0 or vals[4] == 0:
        return f"box width {t[3]} height {t[4]}"
    return None


def _check_row(
    lineno: int, t: list[str], line: str, fr: _FileRules, issues: _Issues, seen: dict[bytes, int]
) -> tuple[str, int] | None:
    """Judge one row, recording its defects; (kind, class id) when it is a valid instance."""
    vals, why = _parse_row(t)
    if vals is None:
        issues.bad(LBL_PARSE, lineno, line, why)
        return None
    kind, problem = _row_kind(len(vals), fr)
    if problem is not None:
        issues.bad(LBL_COLUMNS, lineno, line, problem)
        return None
    v32 = array("f", vals)
    c = v32[0]
    problem = _class_problem(c, t[0], fr.nc)
    ok = problem is None
    if problem is not None:
        issues.bad(LBL_CLASS, lineno, line, problem)
    if kind == "pose" and fr.pose_cols is None:
        return (kind, int(c)) if ok else None
    for code, problem in ((LBL_COORDS, _coords_problem(kind, v32, fr.ndim)),
                          (LBL_ZERO, _zero_size_problem(kind, vals, t))):
        if problem is not None:
            issues.bad(code, lineno, line, problem)
            ok = False
    # duplicates (np.unique over float32 rows)
    key = v32.tobytes()
    first = seen.get(key)
    if first is not None:
        issues.bad(LBL_DUP, lineno, line, f"same as line {first}")
        return None
    seen[key] = lineno
    return (kind, int(c)) if ok else None


def check_label(path: str, index: int, spec: LabelSpec, agg: Agg) -> None:
    """Read one label file and record each defective row (all rows, not just the first as Ultralytics reports)."""
    text = _read_label_text(path, index, agg)
    if text is None:
        return
    rows: list[tuple[int, list[str], str]] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        t = line.split()
        if t:
            rows.append((lineno, t, line))
    if not rows:
        agg.empty.append(index)
        return

    pose_cols = spec.pose_cols
    if pose_cols and spec.task != "pose":  # verify_image_label: a box task keeps the box of pose-shaped rows
        rows = [(n, t[:5] if len(t) == pose_cols else t, ln) for n, t, ln in rows]
    polygon_file = spec.task != "pose" and any(len(t) > 6 for _, t, _ in rows)
    fr = _FileRules(spec.task, spec.nc, spec.kpt, pose_cols, polygon_file)

    issues = _Issues(path)
    seen: dict[bytes, int] = {}
    valid = 0
    for lineno, t, line in rows:
        instance = _check_row(lineno, t, line, fr, issues, seen)
        if instance is not None:
            kind, c = instance
            valid += 1
            agg.kinds[kind] += 1
            agg.classes[c] += 1
    agg.instances += valid
    for code, (n_rows, examples) in issues.by_code.items():
        agg.add(code, n_rows, examples)


def _is_float(x: str) -> bool:
    try:
        float(x)
    except ValueError:
        return False
    return True


PREFETCH_GROUP = 64  # files whose reads are queued together
PREFETCH_HEAD = 8192  # bytes of each image's header to queue (PIL reads the JPEG markers from here)


def prefetch(items: list[tuple[int, str, str]], labels: bool = True) -> None:
    """Queue the reads a group of checks will make (image head and tail, label file unless ``labels`` is false)
    without waiting for them.

    On a cold page cache each check otherwise waits for 3 reads one after another (~0.1 ms each on an SSD);
    POSIX_FADV_WILLNEED lets the device work on the whole group at once. A no-op where fadvise is missing.
    """
    if _FADV_WILLNEED is None:
        return
    for _, img, lbl in items:
        try:
            fd = os.open(img, os.O_RDONLY)
        except (OSError, ValueError):
            continue
        try:
            size = os.fstat(fd).st_size
            os.posix_fadvise(fd, 0, min(size, PREFETCH_HEAD), _FADV_WILLNEED)
            if size > PREFETCH_HEAD:
                os.posix_fadvise(fd, max(PREFETCH_HEAD, size - 4096), 4096, _FADV_WILLNEED)
        except OSError:
            pass
        finally:
            os.close(fd)
        if not labels:
            continue
        try:
            fd = os.open(lbl, os.O_RDONLY)
        except (OSError, ValueError):
            continue
        try:
            os.posix_fadvise(fd, 0, 0, _FADV_WILLNEED)
        except OSError:
            pass
        finally:
            os.close(fd)


def check_chunk(args: tuple[list[tuple[int, str, str]], LabelSpec]) -> Agg:
    """Worker entry point: check (index, image, label) triples; returns the chunk's aggregate."""
    items, spec = args
    agg = Agg()
    for g in range(0, len(items), PREFETCH_GROUP):
        group = items[g : g + PREFETCH_GROUP]
        prefetch(group)
        for index, img, lbl in group:
            agg.n += 1
            check_image(img, agg)
            check_label(lbl, index, spec, agg)
    return agg
