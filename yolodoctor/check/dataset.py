"""Dataset probe for ``yolodoctor check``: is the data.yaml usable, and will every image and label load?

``check_dataset(data, task=None, workers=None)`` reads data.yaml with ``yaml.safe_load`` only (never Ultralytics'
``check_det_dataset``, which may exec the yaml's ``download:`` field, and never downloads anything), resolves paths
exactly as Ultralytics 8.4 does, then checks every image header and label file in a process pool. Importing this
module is cheap: no torch, no ultralytics.

Finding ids (category ``dataset``):

data.yaml
  DS001 data-yaml-unparseable       error    not YAML, not a mapping, unreadable, not a .yaml file
  DS002 data-yaml-missing-key       error    train / val / names-or-nc missing or empty
  DS003 data-yaml-invalid-value     error    wrong type (path, splits, names, kpt_shape), nc not an integer, bad names
  DS004 data-yaml-names-mismatch    error    len(names) != nc
  DS005 data-yaml-path-missing      error    a train/val path does not exist (warning when only test is missing)
  DS006 data-yaml-download-not-run  info     a download: field is present; check never runs it
  DS007 split-without-images        error    a train/val split holds no image files
  DS008 data-yaml-kpt-shape         error    pose without a valid kpt_shape, or flip_idx of the wrong length
  DS009 data-yaml-relative-path     warning  a relative path: resolves against the current directory or datasets_dir
  DS010 dataset-task-not-checked    info     classification datasets are not checked here
  DS011 data-not-given              info     no data= given (check/run.py): no dataset examined
images
  DS101 image-without-label         error    images without a label file (warning when <= 10% of every split)
  DS102 label-without-image         error    label files no image maps to
  DS103 empty-label-file            info     empty label files (background images)
  DS104 image-file-missing          error    images listed in a split .txt that do not exist
  DS105 image-empty-file            error    0-byte image files
  DS106 image-corrupt               error    PIL cannot open/verify, or not a training image format
  DS107 jpeg-truncated              error    JPEG without the FFD9 end-of-image marker
  DS108 image-too-small             error    image side under 10 px
  DS109 split-overlap               warning  the same image in train and val
labels
  DS201 label-wrong-column-count    error    row length wrong for the task (detect 5, segment polygon, pose 5+K*D, obb)
  DS202 label-unparseable           error    tokens that are not finite numbers, non-UTF-8 files
  DS203 label-class-out-of-range    error    class id negative, non-integer or >= nc
  DS204 label-coords-out-of-range   error    coordinates outside [-0.01, 1.01] (Ultralytics' tolerance)
  DS205 label-zero-size-box         error    zero width/height box, zero-area polygon
  DS206 label-duplicate-rows        error    identical rows in one file

Facts (flat keys): dataset.yaml, dataset.root, dataset.task, dataset.classes, dataset.images, dataset.images.train,
dataset.images.val, dataset.images.test, dataset.images.unusable, dataset.labels.found, dataset.labels.missing,
dataset.labels.empty, dataset.labels.orphan, dataset.instances, dataset.instances_per_class, dataset.label_rows,
dataset.image_bytes_mean, dataset.image_bytes_total, dataset.image_formats, dataset.image_size_median,
dataset.download, dataset.check_seconds, dataset.check_workers.
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
    walk_files,
    load_yaml,
    resolve_root,
    resolve_split,
)
from yolodoctor.check.labels import IMG_FORMATS, img2label_paths
from yolodoctor.check.probe import ProbeResult
from yolodoctor.errors import InputError, UsageError
from yolodoctor.findings import Finding, Fix, Severity

__all__ = ["DatasetCheck", "DatasetIndex", "check_dataset", "IMG_FORMATS", "img2label_paths", "usable_cores"]

CATEGORY = "dataset"
MISSING_LABELS_ERROR_SHARE = 0.10  # above this share of a split, images without labels are an error
POOL_MIN_FILES = 400  # below this, a process pool costs more than it saves


@dataclass
class DatasetCheck(ProbeResult):
    index: DatasetIndex | None = None


# --------------------------------------------------------------------------------------------------------------------
# finding catalogue

_YAML = {  # YamlProblem.kind -> (id, name, severity, fix note)
    "unparseable": (
        "DS001",
        "data-yaml-unparseable",
        Severity.error,
        "Fix the YAML syntax: a data.yaml is a mapping with train:, val: and names: (validate it with "
        "python -c 'import yaml,sys; print(yaml.safe_load(open(sys.argv[1])))' data.yaml).",
    ),
    "missing-key": (
        "DS002",
        "data-yaml-missing-key",
        Severity.error,
        "Add the missing keys: train: and val: (image folders or .txt lists, relative to path:) and names: "
        "(a list or {index: name} mapping).",
    ),
    "invalid-value": (
        "DS003",
        "data-yaml-invalid-value",
        Severity.error,
        "Use the types Ultralytics expects: path a string; train/val/test a string or list of strings; names a "
        "list or {0: name, ...} mapping with indices 0..n-1; nc an integer; kpt_shape [keypoints, 2 or 3].",
    ),
    "names-mismatch": (
        "DS004",
        "data-yaml-names-mismatch",
        Severity.error,
        "Make nc equal the number of names, or delete nc (Ultralytics derives it from names).",
    ),
    "path-missing": (
        "DS005",
        "data-yaml-path-missing",
        Severity.error,
        "Point train/val at existing image folders or .txt lists. Relative splits are joined to path: (or the "
        "yaml's folder when path: is absent); omit path: to keep a dataset portable.",
    ),
    "no-images": (
        "DS007",
        "split-without-images",
        Severity.error,
        f"Put images ({', '.join(sorted(IMG_FORMATS))}) in the split folder (searched recursively, hidden files "
        "skipped) or list them in the .txt file, one path per line (./ = the list's folder).",
    ),
    "kpt-shape": (
        "DS008",
        "data-yaml-kpt-shape",
        Severity.error,
        "Set kpt_shape: [number of keypoints, 2 (x y) or 3 (x y visible)] and, if you flip, flip_idx with one "
        "entry per keypoint.",
    ),
    "cwd-path": (
        "DS009",
        "data-yaml-relative-path",
        Severity.warning,
        "Use an absolute path:, or omit path: so that Ultralytics uses the yaml's own folder.",
    ),
}

_DEFECTS = {  # labels.* code -> (id, name, severity, fix note)
    L.NO_LABEL: (
        "DS101",
        "image-without-label",
        Severity.error,
        "Ultralytics finds an image's labels by replacing the last /images/ in its path with /labels/ and the "
        "extension with .txt; put the label files there. For images meant as backgrounds (nothing to detect), create "
        "an empty .txt label file so that the intent is explicit.",
    ),
    "orphan": (
        "DS102",
        "label-without-image",
        Severity.error,
        "Restore the missing images (same name stem, under the images/ folder that mirrors this labels/ folder) or "
        "delete the stray label files; their annotations are never trained on.",
    ),
    L.EMPTY_LABEL: ("DS103", "empty-label-file", Severity.info, None),
    L.IMG_MISSING: (
        "DS104",
        "image-file-missing",
        Severity.error,
        "Fix the paths in the split's .txt list: entries starting with ./ are relative to the list's folder, "
        "other relative entries to the directory training runs from.",
    ),
    L.IMG_EMPTY: (
        "DS105",
        "image-empty-file",
        Severity.error,
        "Copy these images again (an interrupted copy or download leaves 0-byte files), or delete them with their "
        "label files.",
    ),
    L.IMG_CORRUPT: (
        "DS106",
        "image-corrupt",
        Severity.error,
        "Re-export or delete these images (and their label files). Ultralytics skips them; for a file PIL cannot "
        "identify it first tries to pip-install pi-heif, which stalls on an offline machine.",
    ),
    L.JPEG_TRUNCATED: (
        "DS107",
        "jpeg-truncated",
        Severity.error,
        "Copy the originals again, or re-encode these JPEGs once yourself (e.g. PIL open + save); otherwise every "
        "fresh label scan has Ultralytics rewrite them in place, and drops those it cannot decode.",
    ),
    L.IMG_SMALL: (
        "DS108",
        "image-too-small",
        Severity.error,
        "Replace these with the real images or delete them; Ultralytics drops images under 10 px on a side.",
    ),
    "overlap": (
        "DS109",
        "split-overlap",
        Severity.warning,
        "Make train and val disjoint; validation on training images overstates accuracy.",
    ),
    L.LBL_COLUMNS: (
        "DS201",
        "label-wrong-column-count",
        Severity.error,
        "One object per row, normalised 0-1: detect 'class xc yc w h'; segment 'class x1 y1 x2 y2 x3 y3 ...'; pose "
        "'class xc yc w h' + one 'x y [v]' per keypoint of kpt_shape; obb 'class x1 y1 x2 y2 x3 y3 x4 y4'. Re-export "
        "the labels for the task you train, or train the task the labels were made for.",
    ),
    L.LBL_PARSE: (
        "DS202",
        "label-unparseable",
        Severity.error,
        "Label files hold numbers only (UTF-8): remove headers, comments and class names (class ids are 0-based "
        "indices into names).",
    ),
    L.LBL_CLASS: (
        "DS203",
        "label-class-out-of-range",
        Severity.error,
        "Add the missing classes to names: in data.yaml, or remap the label class ids to integers 0..nc-1.",
    ),
    L.LBL_COORDS: (
        "DS204",
        "label-coords-out-of-range",
        Severity.error,
        "Coordinates are fractions of the image width and height: divide pixel values by the image size and clip "
        "to 0-1.",
    ),
    L.LBL_ZERO: (
        "DS205",
        "label-zero-size-box",
        Severity.error,
        "Delete these rows or fix the tool that exported them; a box of zero width or height (or a flat polygon) "
        "marks nothing.",
    ),
    L.LBL_DUP: (
        "DS206",
        "label-duplicate-rows",
        Severity.error,
        "Deduplicate the label files and the step that produced them (a merge or export that ran twice).",
    ),
}


def _n(k: int, noun: str) -> str:
    return f"{k} {noun}" if k == 1 else f"{k} {noun}s"


def _fix(note: str | None) -> Fix | None:
    return Fix(note=note, safety="safe") if note else None


def _finding(spec: tuple, message: str, evidence: dict, severity: Severity | None = None) -> Finding:
    fid, name, sev, note = spec
    return Finding(
        id=fid,
        name=name,
        category=CATEGORY,
        severity=severity if severity is not None else sev,
        message=message,
        evidence=evidence,
        fix=_fix(note),
    )


def _yaml_findings(problems: list[YamlProblem], findings: list[Finding], prefix: str = "data.yaml") -> None:
    """One finding per problem kind, in catalogue order."""
    by_kind: dict[str, list[YamlProblem]] = {}
    for p in problems:
        by_kind.setdefault(p.kind, []).append(p)
    for kind, spec in _YAML.items():
        ps = by_kind.get(kind)
        if not ps:
            continue
        msg = "; ".join(p.message for p in ps[:5])
        if kind != "unparseable":
            msg = f"{prefix}: {msg}"
        if len(ps) > 5:
            msg += f"; and {len(ps) - 5} more"
        ev: dict[str, Any] = dict(ps[0].evidence) if len(ps) == 1 else {"problems": [p.evidence for p in ps[:20]]}
        sev = None
        if kind == "path-missing" and all(p.evidence.get("split") == "test" for p in ps):
            sev = Severity.warning
        findings.append(_finding(spec, msg, ev, sev))


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


def _locate(data: str | Path) -> Path:
    try:
        p = Path(os.fspath(data))
    except TypeError:
        raise InputError(f"data.yaml not found: {data!r}; check never downloads datasets") from None
    if is_dir(p):
        ys = sorted(x for e in ("*.yaml", "*.yml") for x in p.glob(e))
        if len(ys) == 1:
            return ys[0]
        raise InputError(
            f"data.yaml not found: {p} is a folder with {len(ys)} yaml files; pass the data.yaml itself"
        )
    if not is_file(p):
        raise InputError(f"data.yaml not found: {data}; check never downloads datasets")
    return p


def _run_pool(items: list[tuple[int, str, str]], spec: L.LabelSpec, workers: int) -> tuple[L.Agg, int]:
    n = len(items)
    agg = L.Agg()
    if workers <= 1 or n < POOL_MIN_FILES:
        agg.merge(L.check_chunk((items, spec)))
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
            for part in ex.map(L.check_chunk, chunks):
                agg.merge(part)
        return agg, workers
    except (OSError, RuntimeError, ImportError):  # no /dev/shm, process limits, broken pool: do it here
        agg = L.Agg()
        for c in chunks:
            agg.merge(L.check_chunk(c))
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


def check_dataset(data: str | Path, *, task: str | None = None, workers: int | None = None) -> DatasetCheck:
    """Check a detect/segment/pose/obb data.yaml and every image and label it names. See the module docstring."""
    t0 = time.perf_counter()
    if task is not None and task not in (*TASKS, "classify"):
        raise UsageError(f"unknown task {task!r} (choose detect, segment, pose, obb or classify)")
    yaml_file = _locate(data)
    res = DatasetCheck()
    facts, findings = res.facts, res.findings
    facts["dataset.yaml"] = str(yaml_file.resolve())

    raw, problem = load_yaml(yaml_file)
    if problem is not None or raw is None:
        _yaml_findings([problem] if problem else [], findings)
        facts["dataset.check_seconds"] = round(time.perf_counter() - t0, 3)
        return res

    problems: list[YamlProblem] = []
    d = dict(raw)
    dl = d.get("download")
    facts["dataset.download"] = dl is not None
    if dl is not None:
        text = dl if isinstance(dl, str) else repr(dl)
        findings.append(_finding(
            ("DS006", "data-yaml-download-not-run", Severity.info, None),
            "data.yaml has a download: field; check did not run it (it may run Python or a shell command). "
            "Ultralytics runs it when the val images are missing.",
            {"download": text[:300] + ("…" if len(text) > 300 else "")},
        ))

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

    task = infer_task(d, task)
    facts["dataset.task"] = task
    if task == "classify":
        findings.append(_finding(
            ("DS010", "dataset-task-not-checked", Severity.info, None),
            "classification datasets (class folders) are not checked by the dataset probe",
            {"task": task},
        ))
        _yaml_findings(problems, findings, yaml_file.name)
        facts["dataset.check_seconds"] = round(time.perf_counter() - t0, 3)
        return res

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

    raw_splits: dict[str, list[str]] = {}
    all_sources: list[Path] = []
    list_files: set[str] = set()
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
            if split == "val" and dl is not None:
                msg += " (Ultralytics would now run the download: field)"
            problems.append(YamlProblem("path-missing", msg, {"split": split, "path": str(s), "root": str(root)}))
        here = [s for s in sources if s not in gone]
        if not here:
            continue
        all_sources.extend(here)
        list_files.update(os.path.abspath(s) for s in here if is_file(s))
        imgs, notes = list_images(here)
        raw_splits[split] = imgs
        if not imgs and split != "test":
            ev = {"split": split, "sources": [str(s) for s in here], "non_image_files": notes["ignored_files"]}
            if notes["unreadable_lists"]:
                ev["unreadable_lists"] = notes["unreadable_lists"]
            problems.append(YamlProblem("no-images", f"{split}: no image files in {', '.join(map(str, here))}", ev))

    _yaml_findings(problems, findings, yaml_file.name)

    # unique images over splits; labels mapped from the string Ultralytics would hold, then made absolute
    uniq: dict[str, int] = {}
    items: list[tuple[int, str, str]] = []
    membership: list[list[str]] = []
    for split, imgs in raw_splits.items():
        lbls = img2label_paths(imgs)
        paths = []
        for img, lbl in zip(imgs, lbls):
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

    if not items:
        facts["dataset.images"] = 0
        facts["dataset.check_seconds"] = round(time.perf_counter() - t0, 3)
        return res

    n_workers = usable_cores() if workers is None else max(1, int(workers))
    spec = L.LabelSpec(task=task, nc=len(names) if names else None, kpt=kpt)
    agg, used = _run_pool(items, spec, n_workers)

    # --- per-split counts
    split_n = {s: len(v) for s, v in raw_splits.items()}
    miss_by_split = {s: 0 for s in raw_splits}
    for i in agg.missing:
        for s in membership[i]:
            miss_by_split[s] += 1

    # --- findings from the per-file checks
    total = len(items)
    if agg.missing:
        agg.missing.sort()
        ex = [
            {"file": items[i][1], "label": items[i][2], "reason": "no label file"}
            for i in agg.missing[: L.MAX_EXAMPLES]
        ]
        shares = {s: miss_by_split[s] / split_n[s] for s in raw_splits if split_n[s]}
        worst = max(shares.values(), default=0.0)
        sev = Severity.error if worst > MISSING_LABELS_ERROR_SHARE else Severity.warning
        per = ", ".join(f"{s} {miss_by_split[s]}/{split_n[s]}" for s in raw_splits if miss_by_split[s])
        findings.append(
            _finding(
                _DEFECTS[L.NO_LABEL],
                f"{len(agg.missing)} of {total} images have no label file ({per}); Ultralytics trains on them as "
                "backgrounds with no objects",
                {"files": len(agg.missing), "images": total, "by_split": miss_by_split, "examples": ex},
                sev,
            )
        )
    expected = {lb for _, _, lb in items}
    orphans = _orphan_labels(all_sources, expected, list_files)
    if orphans:
        findings.append(
            _finding(
                _DEFECTS["orphan"],
                f"{len(orphans)} label files have no matching image; their annotations are never used",
                {
                    "files": len(orphans),
                    "examples": [{"file": p, "reason": "no image with this name stem"} for p in orphans[:5]],
                },
            )
        )
    if agg.empty:
        agg.empty.sort()
        findings.append(_finding(
            _DEFECTS[L.EMPTY_LABEL],
            f"{len(agg.empty)} of {total} images have an empty label file: trained as backgrounds",
            {"files": len(agg.empty), "examples": [{"file": items[i][2]} for i in agg.empty[: L.MAX_EXAMPLES]]},
        ))
    for code, text in (
        (L.IMG_MISSING, "are listed in a split but do not exist"),
        (L.IMG_EMPTY, "are empty (0-byte) files"),
        (L.IMG_CORRUPT, "cannot be read as images (Ultralytics drops them)"),
        (L.JPEG_TRUNCATED, "are JPEGs with no end-of-image marker (truncated); Ultralytics re-encodes them in place"),
        (L.IMG_SMALL, "are smaller than 10 px on a side (Ultralytics drops them)"),
    ):
        if code in agg.defects:
            files, _, ex = agg.defects[code]
            findings.append(
                _finding(_DEFECTS[code], f"{files} of {total} images {text}", {"files": files, "examples": ex})
            )
    if "train" in raw_splits and "val" in raw_splits:
        tr = set(map(os.path.abspath, raw_splits["train"])) if raw_splits["train"] else set()
        both = sorted(p for p in map(os.path.abspath, raw_splits["val"]) if p in tr)
        if both:
            findings.append(
                _finding(
                    _DEFECTS["overlap"],
                    f"{len(both)} images are in both train and val",
                    {"files": len(both), "examples": [{"file": p} for p in both[:5]]},
                )
            )
    nc_txt = f"0-{len(names) - 1}" if names else "unknown"
    drops = "Ultralytics drops every image whose label file has one"
    for code, text, tail in (
        (L.LBL_COLUMNS, f"the wrong number of columns for a {task} dataset", drops),
        (L.LBL_PARSE, "values that are not numbers (or a file that cannot be read as text)", drops),
        (L.LBL_CLASS, f"class ids outside {nc_txt}", drops),
        (L.LBL_COORDS, "coordinates outside 0-1", drops),
        (
            L.LBL_ZERO,
            "boxes of zero width or height (or polygons of zero area)",
            "Ultralytics keeps them, and in validation they count as objects that can never be found",
        ),
        (
            L.LBL_DUP,
            "a duplicate of an earlier row of the same file",
            "Ultralytics removes them at load; duplicates usually mean an export or merge step ran twice",
        ),
    ):
        if code in agg.defects:
            files, rows, ex = agg.defects[code]
            findings.append(
                _finding(
                    _DEFECTS[code],
                    f"{_n(rows, 'label row')} in {_n(files, 'file')} {'has' if rows == 1 else 'have'} {text}; {tail}",
                    {"files": files, "rows": rows, "examples": ex},
                )
            )

    # --- facts
    image_codes = (L.IMG_MISSING, L.IMG_EMPTY, L.IMG_CORRUPT, L.IMG_SMALL)
    unusable = sum(agg.defects[c][0] for c in image_codes if c in agg.defects)
    facts["dataset.images"] = total
    facts["dataset.images.unusable"] = unusable
    facts["dataset.labels.found"] = total - len(agg.missing)
    facts["dataset.labels.missing"] = len(agg.missing)
    facts["dataset.labels.empty"] = len(agg.empty)
    facts["dataset.labels.orphan"] = len(orphans)
    facts["dataset.instances"] = agg.instances
    facts["dataset.instances_per_class"] = {str(k): v for k, v in sorted(agg.classes.items())}
    facts["dataset.label_rows"] = dict(agg.kinds)
    facts["dataset.image_bytes_total"] = agg.bytes
    facts["dataset.image_bytes_mean"] = round(agg.bytes / total, 1) if total else None
    facts["dataset.image_formats"] = dict(agg.formats.most_common())
    if agg.sizes:
        ws = sorted(w for w, _ in agg.sizes)
        hs = sorted(h for _, h in agg.sizes)
        facts["dataset.image_size_median"] = [ws[len(ws) // 2], hs[len(hs) // 2]]
    else:
        facts["dataset.image_size_median"] = None
    facts["dataset.check_workers"] = used
    facts["dataset.check_seconds"] = round(time.perf_counter() - t0, 3)
    return res
