"""Read a detection-style data.yaml the way Ultralytics 8.4 does, without running any of it.

Mirrors ``ultralytics.data.utils.check_det_dataset`` (key checks, ``nc``/``names`` handling, path resolution) and
``ultralytics.data.base.BaseDataset.get_img_files`` (which files a split holds), but:

- the YAML is parsed with ``yaml.safe_load`` only, and refused when its aliases expand past a bound (yamlsafe.py);
- nothing is downloaded, unpacked or executed: a ``download:`` field is reported, never run;
- every problem becomes a :class:`YamlProblem` (a fact of ``dataset.py``, judged by the DS00x rules) instead of an
  exception.

Nothing here imports torch or ultralytics.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from yolodoctor import yamlsafe
from yolodoctor.check.labels import IMG_FORMATS, img2label_paths

TASKS = ("detect", "segment", "pose", "obb")

# ultralytics.data.utils.DATASET_KEY_TYPES (8.4.190): check_det_dataset raises TypeError for other types.
DATASET_KEY_TYPES: dict[str, tuple[type, ...]] = {
    "path": (str,),
    "train": (str, list),
    "val": (str, list),
    "test": (str, list),
    "names": (list, dict),
    "kpt_shape": (list,),
    "flip_idx": (list,),
}
SPLITS = ("train", "val", "test")

# ultralytics.utils.YAML.load retries a YAML that fails to parse after removing these characters.
_YAML_BAD_CHARS = re.compile(r"[^\x09\x0A\x0D\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD\U00010000-\U0010ffff]+")


@dataclass
class YamlProblem:
    """One problem with data.yaml; ``kind`` picks the rule that reports it (dataset.py YAML_KINDS)."""

    kind: str  # unparseable | missing-key | invalid-value | names-mismatch | path-missing | kpt-shape | cwd-path
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass
class DatasetIndex:
    """What a data.yaml (or a classification folder, ``yaml_path`` None) describes, resolved as Ultralytics resolves it.

    ``splits`` holds the image files of each split (train/val/test) in Ultralytics' order (sorted path strings);
    each image's label file is :meth:`label_path` (``img2label_paths``: last ``/images/`` → ``/labels/``, ``.txt``).
    """

    yaml_path: Path | None
    root: Path
    task: str
    names: dict[int, str]
    kpt_shape: tuple[int, int] | None
    splits: dict[str, list[Path]] = field(default_factory=dict)
    split_sources: dict[str, list[Path]] = field(default_factory=dict)  # the dirs / .txt lists each split names
    download: str | None = None

    @property
    def nc(self) -> int:
        return len(self.names)

    @staticmethod
    def label_path(image: str | Path) -> Path:
        return Path(img2label_paths([os.fspath(image)])[0])

    def label_paths(self, split: str) -> list[Path]:
        return [Path(p) for p in img2label_paths([os.fspath(x) for x in self.splits.get(split, [])])]

    def all_images(self) -> list[Path]:
        """Unique image files over all splits, first occurrence order."""
        seen: dict[str, Path] = {}
        for split in SPLITS:
            for p in self.splits.get(split, []):
                seen.setdefault(os.fspath(p), p)
        return list(seen.values())


# --------------------------------------------------------------------------------------------------------------------
# small safe filesystem helpers: a path from an untrusted YAML may hold NUL bytes, be too long, or be unreadable


def exists(p: str | Path) -> bool:
    try:
        return os.path.exists(p)
    except (OSError, ValueError, TypeError):
        return False


def is_dir(p: str | Path) -> bool:
    try:
        return os.path.isdir(p)
    except (OSError, ValueError, TypeError):
        return False


def is_file(p: str | Path) -> bool:
    try:
        return os.path.isfile(p)
    except (OSError, ValueError, TypeError):
        return False


def _resolve(p: Path) -> Path:
    try:
        return p.resolve()
    except (OSError, ValueError, RuntimeError):
        return Path(os.path.abspath(p))


# --------------------------------------------------------------------------------------------------------------------
# Ultralytics' DATASETS_DIR, read from its settings file (importing ultralytics would be slow and has side effects)


def _user_config_dir() -> Path:
    """ultralytics.utils.get_user_config_dir (Linux branch) plus its /tmp fallback."""
    if env_dir := os.getenv("YOLO_CONFIG_DIR"):
        return Path(env_dir).expanduser() / "Ultralytics"
    return Path(os.getenv("XDG_CONFIG_HOME", Path.home() / ".config")) / "Ultralytics"


def _default_datasets_dir() -> Path:
    """SettingsManager's default: next to the git checkout holding ultralytics, else ./datasets."""
    root: Path | None = None
    try:
        spec = find_spec("ultralytics")
        origin = Path(spec.origin).resolve() if spec and spec.origin else None
    except (ImportError, ValueError, OSError):
        origin = None
    if origin is not None:
        here = origin.parent / "utils" / "git.py"  # GitRepo() starts from ultralytics/utils/git.py
        root = next((d for d in [here, *here.parents] if (d / ".git").exists()), None)
    if root is not None:
        writable = os.access(root.parent, os.W_OK)
        return ((root.parent if writable else root).resolve()) / "datasets"
    return Path().resolve() / "datasets"


def datasets_dir() -> Path:
    """Ultralytics' ``DATASETS_DIR`` (``settings.json`` ``datasets_dir``) without importing ultralytics."""
    candidates = [_user_config_dir() / "settings.json"]
    with contextlib.suppress(AttributeError):  # pragma: no cover - non-POSIX has no getuid
        candidates.append(Path("/tmp") / f"Ultralytics-{os.getuid()}" / "settings.json")
    for f in candidates:
        try:
            value = json.loads(f.read_text(encoding="utf-8")).get("datasets_dir")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(value, str) and value:
            return Path(value)
    return _default_datasets_dir()


# --------------------------------------------------------------------------------------------------------------------


def load_yaml(file: Path) -> tuple[dict | None, YamlProblem | None]:
    """Parse like ``ultralytics.utils.YAML.load`` (same fallback), but with ``yaml.safe_load``."""
    if not str(file).lower().endswith((".yaml", ".yml")):
        return None, YamlProblem(
            "unparseable",
            f"{file.name} is not a .yaml/.yml file; Ultralytics only reads data.yaml files (it would unpack an archive "
            "or download a URL, which check never does)",
            {"file": str(file)},
        )
    try:
        with open(file, errors="ignore", encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        return None, YamlProblem("unparseable", f"cannot read {file}: {e.strerror or e}", {"file": str(file)})
    try:
        data = yamlsafe.safe_load(text)  # safe_load, and no alias bomb
    except Exception as e:
        try:
            data = yamlsafe.safe_load(_YAML_BAD_CHARS.sub("", text))
        except Exception:
            where = getattr(e, "problem_mark", None)
            what = getattr(e, "problem", None) or _one_line(str(e), 120)
            ev: dict[str, Any] = {"file": str(_resolve(file)), "error": _one_line(str(e))}
            at = ""
            if where is not None:
                ev["line"] = where.line + 1
                ev["column"] = where.column + 1
                at = f" (line {where.line + 1}, column {where.column + 1})"
            return None, YamlProblem("unparseable", f"{file.name} does not parse as YAML{at}: {what}", ev)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        return None, YamlProblem(
            "unparseable",
            f"{file.name} is a YAML {type(data).__name__}, not a mapping of keys (train:, val:, names:)",
            {"file": str(file), "type": type(data).__name__},
        )
    return data, None


def _one_line(s: str, limit: int = 300) -> str:
    s = " ".join(s.split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _short(v: Any, limit: int = 200) -> str:
    try:
        s = repr(v)
    except Exception:
        s = f"<{type(v).__name__}>"
    return s if len(s) <= limit else s[: limit - 1] + "…"


def check_names(data: dict, problems: list[YamlProblem]) -> dict[int, str] | None:
    """``nc``/``names`` rules of check_det_dataset + ``check_class_names``; None when unusable."""
    names, has_nc = data.get("names"), "nc" in data
    if names is None and not has_nc:
        problems.append(YamlProblem("missing-key", "data.yaml has neither names: nor nc:", {"missing": ["names"]}))
        return None
    nc: Any = data.get("nc")
    if has_nc and (not isinstance(nc, int) or isinstance(nc, bool)):
        try:
            f = float(nc)  # Ultralytics accepts integer-like values: '10', 10.0
            if f != int(f):
                raise ValueError
            nc = int(f)
        except (TypeError, ValueError, OverflowError):
            problems.append(
                YamlProblem("invalid-value", f"nc: {_short(data['nc'])} must be an integer", {"key": "nc"})
            )
            return None
    if names is not None and nc is not None and len(names) != nc:
        problems.append(
            YamlProblem(
                "names-mismatch",
                f"names has {len(names)} entries but nc is {nc}",
                {"names": len(names), "nc": nc},
            )
        )
        return None
    if names is None:
        if nc is None or nc <= 0:
            problems.append(
                YamlProblem("invalid-value", f"nc: {_short(nc)} must be at least 1", {"key": "nc", "nc": nc})
            )
            return None
        if nc > 1_000_000:
            problems.append(YamlProblem("invalid-value", f"nc: {nc} is implausibly large", {"key": "nc", "nc": nc}))
            return None
        return {i: f"class_{i}" for i in range(nc)}
    try:  # ultralytics.nn.autobackend.check_class_names
        if isinstance(names, list):
            names = dict(enumerate(names))
        out = {int(k): str(v) for k, v in names.items()}
    except (TypeError, ValueError, OverflowError) as e:
        problems.append(
            YamlProblem(
                "invalid-value", f"names keys must be class indices 0..n-1 ({_one_line(str(e))})", {"key": "names"}
            )
        )
        return None
    if not out:
        problems.append(
            YamlProblem("invalid-value", "names is empty: at least one class is required", {"key": "names"})
        )
        return None
    if max(out) >= len(out) or min(out) < 0:
        problems.append(
            YamlProblem(
                "invalid-value",
                f"{len(out)}-class names must use indices 0-{len(out) - 1}, not {min(out)}-{max(out)}",
                {"key": "names", "min": min(out), "max": max(out)},
            )
        )
        return None
    return out


def check_kpt_shape(data: dict, task: str, problems: list[YamlProblem]) -> tuple[int, int] | None:
    """kpt_shape as YOLODataset requires for pose: [nkpt > 0, ndim in {2, 3}]; flip_idx length must match."""
    ks = data.get("kpt_shape")
    if ks is None:
        if task == "pose":
            problems.append(
                YamlProblem("kpt-shape", "a pose dataset needs kpt_shape: [keypoints, 2 or 3] in data.yaml", {})
            )
        return None
    ok = (
        isinstance(ks, list)
        and len(ks) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in ks)
        and ks[0] > 0
        and ks[1] in (2, 3)
        and ks[0] < 100_000
    )
    if not ok:
        if task == "pose":
            problems.append(
                YamlProblem(
                    "kpt-shape",
                    f"kpt_shape: {_short(ks)} must be [number of keypoints, 2 or 3], e.g. [17, 3]",
                    {"kpt_shape": _short(ks)},
                )
            )
        return None
    nkpt, ndim = ks
    flip = data.get("flip_idx")
    if task == "pose" and isinstance(flip, list) and flip and len(flip) != nkpt:
        problems.append(
            YamlProblem(
                "kpt-shape",
                f"flip_idx has {len(flip)} entries but kpt_shape has {nkpt} keypoints; Ultralytics raises ValueError",
                {"flip_idx_len": len(flip), "kpt_shape": [nkpt, ndim]},
            )
        )
    return nkpt, ndim


def resolve_root(data: dict, yaml_file: Path, problems: list[YamlProblem]) -> Path:
    """check_det_dataset: ``path`` (or the yaml's folder); a relative one that does not exist goes under DATASETS_DIR.

    A relative ``path:`` that exists is taken relative to the *current directory*, as Ultralytics does.
    """
    raw = data.get("path")
    if not raw:
        return yaml_file.parent
    p = Path(raw)
    if p.is_absolute():
        return p
    if exists(p):
        root = _resolve(p)
        problems.append(
            YamlProblem(
                "cwd-path",
                f"path: {raw} is relative: Ultralytics resolves it against the current directory ({os.getcwd()}), "
                "not the yaml's folder, so the dataset moves when you run from elsewhere",
                {"path": raw, "resolved": str(root)},
            )
        )
        return root
    root = _resolve(datasets_dir() / p)
    problems.append(
        YamlProblem(
            "cwd-path",
            f"path: {raw} is relative and not under the current directory: Ultralytics looks for it in its "
            f"datasets_dir ({root})",
            {"path": raw, "resolved": str(root)},
        )
    )
    return root


def resolve_split(root: Path, value: Any) -> list[Path] | None:
    """check_det_dataset's prepend-path rule for one split value (str or list); None for values it cannot use."""
    if isinstance(value, str):
        x = _resolve(root / value)
        if not exists(x) and value.startswith("../"):
            x = _resolve(root / value[3:])
        return [x]
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return [_resolve(root / v) for v in value]
    return None


def walk_files(top: str, recursive: bool = True) -> Iterator[tuple[str, str]]:
    """(folder, name) of the non-hidden files under ``top``: os.scandir, following folder links once each (as
    glob's ``**`` would, without its cost)."""
    stack: list[str] = [top]
    seen: set[str] = set()
    while stack:
        d = stack.pop()
        try:
            real = os.path.realpath(d)
        except (OSError, ValueError):
            continue
        if real in seen:
            continue
        seen.add(real)
        try:
            it = os.scandir(d)
        except (OSError, ValueError):
            continue
        with it:
            for e in it:
                if e.name.startswith("."):
                    continue
                try:
                    isdir = e.is_dir()
                except OSError:
                    isdir = False
                if isdir:
                    if recursive:
                        stack.append(os.path.join(d, e.name))
                else:
                    yield d, e.name


def _scan_tree(top: str, out: list[str], ignored: list[int]) -> None:
    """glob.glob(top/**/*.*, recursive=True): image files into ``out``, other files with a suffix counted."""
    for d, name in walk_files(top):
        if "." in name:
            if name.rpartition(".")[2].lower() in IMG_FORMATS:
                out.append(os.path.join(d, name))
            else:
                ignored[0] += 1


def list_images(sources: list[Path]) -> tuple[list[str], dict[str, Any]]:
    """BaseDataset.get_img_files: dirs are searched recursively, .txt files list images (``./`` = the list's folder).

    Returns sorted image path strings exactly as Ultralytics would hold them (relative list entries stay relative to
    the current directory) and notes (non-image files skipped, unreadable lists).
    """
    files: list[str] = []
    ignored = [0]
    notes: dict[str, Any] = {"unreadable_lists": [], "relative_entries": 0}
    for p in sources:
        sp = os.fspath(p)
        if is_dir(sp):
            _scan_tree(sp, files, ignored)
        elif is_file(sp):
            try:
                with open(sp, encoding="utf-8-sig") as t:
                    lines = t.read().strip().splitlines()
            except (OSError, UnicodeDecodeError, ValueError) as e:
                notes["unreadable_lists"].append({"file": sp, "error": _one_line(str(e))})
                continue
            parent = str(p.parent) + os.sep
            for x in lines:
                if x.rpartition(".")[-1].lower() not in IMG_FORMATS:
                    if x.strip():
                        ignored[0] += 1
                    continue
                if x.startswith("./"):
                    x = x.replace("./", parent, 1)
                elif not os.path.isabs(x):
                    notes["relative_entries"] += 1  # Ultralytics opens these relative to the current directory
                files.append(x)  # kept as written: img2label_paths works on this very string
    notes["ignored_files"] = ignored[0]
    return sorted(files), notes


def infer_task(data: dict, task: str | None) -> str:
    if task:
        return task
    return "pose" if data.get("kpt_shape") is not None else "detect"
