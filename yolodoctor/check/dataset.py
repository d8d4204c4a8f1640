"""Dataset probe for ``yolodoctor check``: is the data.yaml usable, and will every image and label load?

``check_dataset(data, task=None, workers=None, split="val")`` reads data.yaml with ``yaml.safe_load`` only (never
Ultralytics' ``check_det_dataset``, which may exec the yaml's ``download:`` field, and never downloads anything),
resolves paths exactly as Ultralytics 8.4 does, then checks every image header and label file in a process pool.
Importing this module is cheap: no torch, no ultralytics.

It reports facts, and the DS rules in rules/ turn them into findings:

- ``dataset.yaml_problems``: what is wrong with data.yaml, one item per kind of problem (unparseable, missing-key,
  invalid-value, names-mismatch, path-missing, no-images, kpt-shape, cwd-path) with its sentences and particulars;
- ``dataset.defects``: the per-file verdicts Ultralytics' loader would reach (labels.py), one item per kind found
  (no_label, orphan_label, empty_label, img_missing, img_empty, img_corrupt, jpeg_truncated, img_small,
  split_overlap, lbl_columns, lbl_parse, lbl_class, lbl_coords, lbl_zero, lbl_dup) with the number of files (and
  label rows) and the first files as examples;
- counts and summaries: dataset.yaml, dataset.root, dataset.task, dataset.classes, dataset.images,
  dataset.images.train, dataset.images.val, dataset.images.test, dataset.images.unusable, dataset.labels.found,
  dataset.labels.missing, dataset.labels.empty, dataset.labels.orphan, dataset.instances, dataset.instances_per_class,
  dataset.label_rows, dataset.image_bytes_mean, dataset.image_bytes_total, dataset.image_formats,
  dataset.image_size_median, dataset.download, dataset.download_text, dataset.check_seconds, dataset.check_workers.

A classification training takes a folder of class folders instead of a data.yaml: with task=classify (a -cls
model), or a folder without a yaml that holds class folders, the folder is read as Ultralytics' check_cls_dataset
and ClassificationDataset read it (classify.py): its layout facts (``dataset.cls.*``), the same ``dataset.defects``
image verdicts and image counts, and dataset.task "classify". A folder passed to a detection task without a
data.yaml in it is an InputError that says what to pass.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yolodoctor.check import classify as C
from yolodoctor.check import labels as L
from yolodoctor.check.datayaml import (
    DATASET_KEY_TYPES,
    SPLITS,
    TASKS,
    DatasetIndex,
    YamlProblem,
    check_kpt_shape,
    check_names,
    exists,
    infer_task,
    is_dir,
    is_file,
    list_images,
    load_yaml,
    resolve_root,
    resolve_split,
    walk_files,
)
from yolodoctor.check.labels import IMG_FORMATS, img2label_paths
from yolodoctor.check.probe import ProbeResult
from yolodoctor.errors import InputError, UsageError

__all__ = ["IMG_FORMATS", "DatasetCheck", "DatasetIndex", "check_classification", "check_dataset", "img2label_paths",
           "usable_cores"]

POOL_MIN_FILES = 400  # below this, a process pool costs more than it saves


@dataclass
class DatasetCheck(ProbeResult):
    index: DatasetIndex | None = None


# --------------------------------------------------------------------------------------------------------------------
# the facts the DS rules read

YAML_KINDS = ("unparseable", "missing-key", "invalid-value", "names-mismatch", "path-missing", "no-images", "kpt-shape",
              "cwd-path")
MAX_SENTENCES = 5  # problems of one kind written out; the rest counted


def yaml_problems(problems: list[YamlProblem], file_name: str) -> list[dict[str, Any]]:
    """One item per kind of problem, in YAML_KINDS order: its sentences (the first five), count and particulars."""
    by_kind: dict[str, list[YamlProblem]] = {}
    for p in problems:
        by_kind.setdefault(p.kind, []).append(p)
    out = []
    for kind in YAML_KINDS:
        ps = by_kind.get(kind)
        if not ps:
            continue
        text = "; ".join(p.message for p in ps[:MAX_SENTENCES])
        if len(ps) > MAX_SENTENCES:
            text += f"; and {len(ps) - MAX_SENTENCES} more"
        out.append({"kind": kind, "file": file_name, "text": text, "count": len(ps),
                    "detail": dict(ps[0].evidence) if len(ps) == 1 else {"problems": [p.evidence for p in ps[:20]]},
                    "test_only": all(p.evidence.get("split") == "test" for p in ps)})
    return out


# --------------------------------------------------------------------------------------------------------------------


def usable_cores() -> int:
    """CPUs this process may run on: affinity, then a cgroup v2 CPU quota if one is set."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            n = min(n, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, n)


def _yamls(p: Path) -> list[Path]:
    try:
        return sorted(x for e in ("*.yaml", "*.yml") for x in p.glob(e))
    except OSError:
        return []


def _locate(data: str | Path, task: str | None = None) -> Path:
    """The data.yaml to read: ``data`` itself, or the one yaml in the folder ``data`` names (as find_dataset_yaml,
    ultralytics/data/utils.py, takes a folder's yaml)."""
    try:
        p = Path(os.fspath(data))
    except TypeError:
        raise InputError(f"data.yaml not found: {data!r}; check never downloads datasets") from None
    if is_dir(p):
        ys = _yamls(p)
        if len(ys) == 1:
            return ys[0]
        if ys:
            raise InputError(f"data.yaml not found: {p} is a folder with {len(ys)} yaml files; pass the data.yaml "
                             "itself")
        if task is not None:
            hint = " (its class folders make it a classification dataset)" if C.looks_like_classification(p) else ""
            raise InputError(f"{p} is a folder without a data.yaml{hint}, and a {task} training takes a data.yaml: "
                             "pass the data.yaml, or model=yolo11n-cls.yaml (any -cls model) for a classification "
                             "training")
        raise InputError(f"{p} holds neither a data.yaml nor class folders of images: pass the data.yaml of a "
                         "detection dataset, or a classification folder (train/<class>/*.jpg) with "
                         "model=yolo11n-cls.yaml")
    if not is_file(p):
        raise InputError(f"data.yaml not found: {data}; check never downloads datasets")
    return p


def _is_classification_folder(data: str | Path) -> bool:
    """A folder with no yaml in it that holds class folders: what a classification training takes."""
    try:
        p = Path(os.fspath(data))
    except TypeError:
        return False
    return is_dir(p) and not _yamls(p) and C.looks_like_classification(p)


def _run_pool(items: list[tuple[int, str, str]], spec: Any, workers: int, fn: Any = L.check_chunk,
              new: Any = L.Agg) -> tuple[L.Agg, int]:
    """Run ``fn`` (labels.check_chunk, or classify.check_images) over the items, in a process pool where it pays;
    the parts merged into one ``new()``."""
    n = len(items)
    agg = new()
    if workers <= 1 or n < POOL_MIN_FILES:
        agg.merge(fn((items, spec)))
        return agg, 1
    size = max(64, min(512, math.ceil(n / (workers * 4))))
    chunks = [(items[i : i + size], spec) for i in range(0, n, size)]
    workers = min(workers, len(chunks))
    methods = mp.get_all_start_methods()
    # fork is cheapest; with other threads alive (a sampler, torch) a forked child can inherit a held lock
    method = "fork" if "fork" in methods and threading.active_count() == 1 else "forkserver"
    if method not in methods:
        method = "spawn"
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context(method)) as ex:
            for part in ex.map(fn, chunks):
                agg.merge(part)
        return agg, workers
    except (OSError, RuntimeError, ImportError):  # no /dev/shm, process limits, broken pool: do it here
        agg = new()
        for c in chunks:
            agg.merge(fn(c))
        return agg, 1


_LIST_NAMES = {"classes.txt", "readme.txt", "license.txt", "notes.txt", "labels.txt"}


def _scan_txt(top: str, out: set[str], recursive: bool) -> None:
    for d, name in walk_files(top, recursive):
        if name.endswith(".txt") and name.lower() not in _LIST_NAMES:
            out.add(os.path.join(d, name))


def _orphan_labels(sources: list[Path], expected: set[str], list_files: set[str]) -> list[str]:
    """Label files in the labels/ counterparts of the split folders (and in folders holding expected labels)."""
    found: set[str] = set()
    for src in sources:
        s = os.fspath(src)
        if is_dir(s):
            lbl_dir = os.path.dirname(img2label_paths([os.path.join(s, "x.jpg")])[0])
            if is_dir(lbl_dir):
                _scan_txt(lbl_dir, found, recursive=True)
    for d in {os.path.dirname(p) for p in expected}:
        if is_dir(d):
            _scan_txt(d, found, recursive=False)
    return sorted(p for p in found if p not in expected and p not in list_files)


def _seconds_since(t0: float) -> float:
    return round(time.perf_counter() - t0, 3)


def _download_facts(dl: Any, facts: dict[str, Any]) -> None:
    facts["dataset.download"] = dl is not None
    if dl is not None:
        text = dl if isinstance(dl, str) else repr(dl)
        facts["dataset.download_text"] = text[:300] + ("…" if len(text) > 300 else "")


def _check_keys(d: dict[str, Any], problems: list[YamlProblem]) -> None:
    """The keys' types (a wrong one is dropped), val: under its other name, and the keys that must be there."""
    for key, types in DATASET_KEY_TYPES.items():
        v = d.get(key)
        if v is not None and not isinstance(v, types):
            want = " or ".join(t.__name__ for t in types)
            problems.append(
                YamlProblem("invalid-value", f"{key}: must be a {want}, not {type(v).__name__}", {"key": key})
            )
            d[key] = None
    if "val" not in d and "validation" in d:  # check_det_dataset renames it (with a warning)
        d["val"] = d.pop("validation")
    missing = [k for k in ("train", "val") if not d.get(k) and k not in {p.evidence.get("key") for p in problems}]
    if missing:
        problems.append(
            YamlProblem(
                "missing-key", f"{' and '.join(k + ':' for k in missing)} missing or empty", {"missing": missing}
            )
        )


@dataclass
class _Splits:
    """The image files each split lists (as Ultralytics would hold them), and where they were found."""

    images: dict[str, list[str]]
    sources: list[Path]  # the split folders and lists that exist
    list_files: set[str]  # the .txt lists among them (not label files)


def _resolve_splits(
    d: dict[str, Any], root: Path, download: Any, index: DatasetIndex, problems: list[YamlProblem]
) -> _Splits:
    found = _Splits({}, [], set())
    for split in SPLITS:
        value = d.get(split)
        if not value:
            continue
        sources = resolve_split(root, value)
        if sources is None:
            problems.append(
                YamlProblem(
                    "invalid-value",
                    f"{split}: must be a path or a list of paths, not {value!r}"[:200],
                    {"key": split},
                )
            )
            continue
        index.split_sources[split] = sources
        gone = [s for s in sources if not exists(s)]
        for s in gone:
            msg = f"{split}: {s} does not exist"
            if split == "val" and download is not None:
                msg += " (Ultralytics would now run the download: field)"
            problems.append(YamlProblem("path-missing", msg, {"split": split, "path": str(s), "root": str(root)}))
        here = [s for s in sources if s not in gone]
        if not here:
            continue
        found.sources.extend(here)
        found.list_files.update(os.path.abspath(s) for s in here if is_file(s))
        imgs, notes = list_images(here)
        found.images[split] = imgs
        if not imgs and split != "test":
            ev = {"split": split, "sources": [str(s) for s in here], "non_image_files": notes["ignored_files"]}
            if notes["unreadable_lists"]:
                ev["unreadable_lists"] = notes["unreadable_lists"]
            problems.append(YamlProblem("no-images", f"{split}: no image files in {', '.join(map(str, here))}", ev))
    return found


def _unique_images(
    raw_splits: dict[str, list[str]], index: DatasetIndex, facts: dict[str, Any]
) -> tuple[list[tuple[int, str, str]], list[list[str]]]:
    """Unique images over splits (index, image, label file) and the splits each is in; labels mapped from the string
    Ultralytics would hold, then made absolute."""
    uniq: dict[str, int] = {}
    items: list[tuple[int, str, str]] = []
    membership: list[list[str]] = []
    for split, imgs in raw_splits.items():
        lbls = img2label_paths(imgs)
        paths = []
        for img, lbl in zip(imgs, lbls, strict=False):
            a = img if os.path.isabs(img) else os.path.abspath(img) if "\x00" not in img else img
            paths.append(Path(a))
            i = uniq.get(a)
            if i is None:
                i = uniq[a] = len(items)
                lb = lbl if os.path.isabs(lbl) or "\x00" in lbl else os.path.abspath(lbl)
                items.append((i, a, lb))
                membership.append([split])
            elif split not in membership[i]:
                membership[i].append(split)
        index.splits[split] = paths
        facts[f"dataset.images.{split}"] = len(imgs)
    return items, membership


def _missing_labels(
    agg: L.Agg, items: list[tuple[int, str, str]], membership: list[list[str]], raw_splits: dict[str, list[str]]
) -> dict[str, Any]:
    """The no_label defect: the files, the first examples, and how many each split misses."""
    split_n = {s: len(v) for s, v in raw_splits.items()}
    miss_by_split = {s: 0 for s in raw_splits}
    for i in agg.missing:
        for s in membership[i]:
            miss_by_split[s] += 1
    agg.missing.sort()
    ex = [
        {"file": items[i][1], "label": items[i][2], "reason": "no label file"}
        for i in agg.missing[: L.MAX_EXAMPLES]
    ]
    shares = {s: miss_by_split[s] / split_n[s] for s in raw_splits if split_n[s]}
    per = ", ".join(f"{s} {miss_by_split[s]}/{split_n[s]}" for s in raw_splits if miss_by_split[s])
    return {"kind": L.NO_LABEL, "files": len(agg.missing), "examples": ex, "by_split": miss_by_split,
            "per_split": per, "missing_share_max": max(shares.values(), default=0.0)}


def _split_overlap(raw_splits: dict[str, list[str]]) -> list[str]:
    """Images in both train and val."""
    if "train" not in raw_splits or "val" not in raw_splits:
        return []
    tr = set(map(os.path.abspath, raw_splits["train"])) if raw_splits["train"] else set()
    return sorted(p for p in map(os.path.abspath, raw_splits["val"]) if p in tr)


def _defects(
    agg: L.Agg, items: list[tuple[int, str, str]], membership: list[list[str]], splits: _Splits, orphans: list[str]
) -> list[dict[str, Any]]:
    """The per-file verdicts, one item per kind found (the DS1xx and DS2xx rules read them)."""
    defects: list[dict[str, Any]] = []
    if agg.missing:
        defects.append(_missing_labels(agg, items, membership, splits.images))
    if orphans:
        defects.append({"kind": "orphan_label", "files": len(orphans),
                        "examples": [{"file": p, "reason": "no image with this name stem"} for p in orphans[:5]]})
    if agg.empty:
        agg.empty.sort()
        defects.append({"kind": L.EMPTY_LABEL, "files": len(agg.empty),
                        "examples": [{"file": items[i][2]} for i in agg.empty[: L.MAX_EXAMPLES]]})
    defects += _image_defects(agg)
    both = _split_overlap(splits.images)
    if both:
        defects.append({"kind": "split_overlap", "files": len(both), "examples": [{"file": p} for p in both[:5]]})
    for code in (L.LBL_COLUMNS, L.LBL_PARSE, L.LBL_CLASS, L.LBL_COORDS, L.LBL_ZERO, L.LBL_DUP):
        if code in agg.defects:
            files, rows, ex = agg.defects[code]
            defects.append({"kind": code, "files": files, "rows": rows, "examples": ex})
    return defects


def _image_defects(agg: L.Agg) -> list[dict[str, Any]]:
    """The image verdicts (missing, empty, corrupt, truncated JPEG, too small), one item per kind found."""
    out = []
    for code in (L.IMG_MISSING, L.IMG_EMPTY, L.IMG_CORRUPT, L.JPEG_TRUNCATED, L.IMG_SMALL):
        if code in agg.defects:
            files, _, ex = agg.defects[code]
            out.append({"kind": code, "files": files, "examples": ex})
    return out


def _image_facts(facts: dict[str, Any], agg: L.Agg, total: int) -> None:
    """Counts and summaries of the images examined."""
    image_codes = (L.IMG_MISSING, L.IMG_EMPTY, L.IMG_CORRUPT, L.IMG_SMALL)
    facts["dataset.images"] = total
    facts["dataset.images.unusable"] = sum(agg.defects[c][0] for c in image_codes if c in agg.defects)
    facts["dataset.image_bytes_total"] = agg.bytes
    facts["dataset.image_bytes_mean"] = round(agg.bytes / total, 1) if total else None
    facts["dataset.image_formats"] = dict(agg.formats.most_common())
    if agg.sizes:
        ws = sorted(w for w, _ in agg.sizes)
        hs = sorted(h for _, h in agg.sizes)
        facts["dataset.image_size_median"] = [ws[len(ws) // 2], hs[len(hs) // 2]]
    else:
        facts["dataset.image_size_median"] = None


def _count_facts(facts: dict[str, Any], agg: L.Agg, total: int, orphans: list[str]) -> None:
    _image_facts(facts, agg, total)
    facts["dataset.labels.found"] = total - len(agg.missing)
    facts["dataset.labels.missing"] = len(agg.missing)
    facts["dataset.labels.empty"] = len(agg.empty)
    facts["dataset.labels.orphan"] = len(orphans)
    facts["dataset.instances"] = agg.instances
    facts["dataset.instances_per_class"] = {str(k): v for k, v in sorted(agg.classes.items())}
    facts["dataset.label_rows"] = dict(agg.kinds)


def check_classification(data: str | Path, *, workers: int | None = None, split: str = "val") -> DatasetCheck:
    """Check a classification folder and every image in it, as a classification training reads it (classify.py);
    ``split``: the training's args.split, the folder it validates on. A folder that is not there (or a URL, an
    archive, a file) is an InputError."""
    t0 = time.perf_counter()
    try:
        folder = C.locate(data)
    except C.NotClassification as e:
        raise InputError(str(e)) from None
    lay = C.read_layout(folder, split)
    res = DatasetCheck()
    facts = res.facts
    facts["dataset.task"] = "classify"
    facts["dataset.root"] = str(folder)
    facts.update(C.layout_facts(lay))
    items, files = C.image_items(lay)
    res.index = DatasetIndex(yaml_path=None, root=folder, task="classify", names=dict(enumerate(lay.names)),
                             kpt_shape=None, splits=files,
                             split_sources={name: [s.path] for name, s in lay.splits.items()})
    agg: L.Agg = C.ClsAgg()
    used = 0
    if items:
        n_workers = usable_cores() if workers is None else max(1, int(workers))
        agg, used = _run_pool(items, None, n_workers, fn=C.check_images, new=C.ClsAgg)
    decoded = agg.decoded if isinstance(agg, C.ClsAgg) else {}
    facts["dataset.defects"] = _image_defects(agg)
    _image_facts(facts, agg, len(items))
    facts["dataset.cls.decoded_bytes_train"] = decoded.get("train", 0)
    facts["dataset.cls.decoded_bytes_val"] = decoded.get("val", 0)
    facts.update(C.disk_cache_facts(lay, decoded))
    facts["dataset.check_workers"] = used
    facts["dataset.check_seconds"] = _seconds_since(t0)
    return res


def check_dataset(data: str | Path, *, task: str | None = None, workers: int | None = None,
                  split: str = "val") -> DatasetCheck:
    """Check a detect/segment/pose/obb data.yaml and every image and label it names, or a classification folder
    (task=classify, or no task and a folder of class folders). See the module docstring."""
    t0 = time.perf_counter()
    if task is not None and task not in (*TASKS, "classify"):
        raise UsageError(f"unknown task {task!r} (choose detect, segment, pose, obb or classify)")
    if task == "classify" or (task is None and _is_classification_folder(data)):
        return check_classification(data, workers=workers, split=split)
    yaml_file = _locate(data, task)
    res = DatasetCheck()
    facts = res.facts
    facts["dataset.yaml"] = str(yaml_file.resolve())

    raw, problem = load_yaml(yaml_file)
    if problem is not None or raw is None:
        facts["dataset.yaml_problems"] = yaml_problems([problem] if problem else [], yaml_file.name)
        facts["dataset.check_seconds"] = _seconds_since(t0)
        return res

    problems: list[YamlProblem] = []
    d = dict(raw)
    dl = d.get("download")
    _download_facts(dl, facts)
    _check_keys(d, problems)

    task = infer_task(d, task)
    facts["dataset.task"] = task

    names = check_names(d, problems) if not any(p.evidence.get("key") == "names" for p in problems) else None
    kpt = check_kpt_shape(d, task, problems)
    root = resolve_root(d, yaml_file.resolve(), problems)
    facts["dataset.root"] = str(root)
    facts["dataset.classes"] = len(names) if names else None

    index = DatasetIndex(
        yaml_path=yaml_file.resolve(),
        root=root,
        task=task,
        names=names or {},
        kpt_shape=kpt,
        download=(dl if isinstance(dl, str) else (repr(dl) if dl is not None else None)),
    )
    res.index = index

    splits = _resolve_splits(d, root, dl, index, problems)
    facts["dataset.yaml_problems"] = yaml_problems(problems, yaml_file.name)
    items, membership = _unique_images(splits.images, index, facts)
    if not items:
        facts["dataset.images"] = 0
        facts["dataset.check_seconds"] = _seconds_since(t0)
        return res

    n_workers = usable_cores() if workers is None else max(1, int(workers))
    spec = L.LabelSpec(task=task, nc=len(names) if names else None, kpt=kpt)
    agg, used = _run_pool(items, spec, n_workers)

    expected = {lb for _, _, lb in items}
    orphans = _orphan_labels(splits.sources, expected, list_files=splits.list_files)
    facts["dataset.defects"] = _defects(agg, items, membership, splits, orphans)
    _count_facts(facts, agg, len(items), orphans)
    facts["dataset.check_workers"] = used
    facts["dataset.check_seconds"] = _seconds_since(t0)
    return res
