"""`yolodoctor make-dataset DIR`: a synthetic detection (segment, pose, obb) dataset with its data.yaml, or with
--task classify a classification folder (DIR/train/<class>/, DIR/val/<class>/, no data.yaml)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from yolodoctor.errors import UsageError
from yolodoctor.presentation import report

if TYPE_CHECKING:
    from yolodoctor.datasets.synth import ClassifyDatasetInfo, DatasetInfo


T = TypeVar("T")
MAX_SIDE = 8192  # an 8192x8192 image is 200 MB decoded per worker; 100000x100000 ran the machine out of memory


def parse_size(size: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", size)
    if not m or not all(32 <= int(v) <= MAX_SIDE for v in (m[1], m[2])):
        raise UsageError(f"--size must be WIDTHxHEIGHT with both from 32 to {MAX_SIDE}, got {size!r}")
    return int(m[1]), int(m[2])


def write_dataset(out_dir: Path, **options: Any) -> DatasetInfo:
    """datasets.synth.make_dataset, its refusals (a user's file or folder there, bad options, a place it cannot write)
    as usage errors."""
    from yolodoctor.datasets.synth import make_dataset

    return _refusing(out_dir, make_dataset, options)


def write_classify_dataset(out_dir: Path, **options: Any) -> ClassifyDatasetInfo:
    """datasets.synth.make_classify_dataset, with write_dataset's refusals."""
    from yolodoctor.datasets.synth import make_classify_dataset

    return _refusing(out_dir, make_classify_dataset, options)


def _refusing(out_dir: Path, make: Callable[..., T], options: dict[str, Any]) -> T:
    try:
        return make(out_dir, **options)
    except FileExistsError as e:
        raise UsageError(str(e).replace("pass force=True", "pass --force")) from None
    except ValueError as e:
        raise UsageError(str(e)) from None
    except OSError as e:
        raise UsageError(f"cannot write the dataset to {out_dir}: {e.strerror or e}") from None


def run(out_dir: Path, *, images: int, val_images: int | None, seed: int, task: str, image_format: str, size: str,
        classes: int, workers: int | None, force: bool, as_json: bool) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    from yolodoctor.console import stderr_console, stdout_console

    width, height = parse_size(size)
    refused, err = None, stderr_console()
    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  TimeRemainingColumn(), console=err, transient=True, disable=not err.is_terminal) as progress:
        bar = progress.add_task("writing images", total=None)
        options: dict[str, Any] = dict(
            images=images, val_images=val_images, seed=seed, image_format=image_format, width=width, height=height,
            classes=classes, workers=workers, force=force,
            progress=lambda done, total: progress.update(bar, completed=done, total=total))
        try:
            info: DatasetInfo | ClassifyDatasetInfo = (
                write_classify_dataset(out_dir, **options) if task == "classify"
                else write_dataset(out_dir, task=task, **options))
        except UsageError as e:  # said once the bar is gone: one line
            refused = e
    if refused is not None:
        raise refused
    d = info.to_dict()
    if as_json:
        report.dump_json(report.envelope("make-dataset", [], {}, dataset=d))
    else:
        where = (f"classification folder: {d['root']} (check it with: yolodoctor check data={d['root']} "
                 "model=yolo11n-cls.yaml)" if task == "classify" else f"data.yaml: {d['yaml_path']}")
        stdout_console().print(
            f"wrote {d['train_images']} train + {d['val_images']} val {task} images ({image_format}, {width}x{height},"
            f" {d['total_bytes'] / 1e6:.1f} MB) in {d['seconds']:.1f} s\n{where}", markup=False)
    return 0
