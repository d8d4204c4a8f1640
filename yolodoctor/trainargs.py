"""KEY=VALUE Ultralytics train arguments, parsed and validated exactly as `yolo train` does.

The values are converted with Ultralytics' own ``smart_value`` and checked with its ``check_cfg``, so a key means
here what it means to Ultralytics. Importing Ultralytics costs about two seconds, so this happens only when a
command that takes train arguments runs.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from yolodoctor.errors import UsageError

# Defaults yolodoctor uses when the user gives none: a model that builds without downloads.
DEFAULT_CLS_MODEL = "yolo11n-cls.yaml"  # task=classify without model=: built from its yaml, offline
CLS_IMGSZ = 224  # ultralytics/models/yolo/classify/train.py: ClassificationTrainer's imgsz where none is given
DEFAULT_MODEL = "yolo11n.yaml"


def _ultralytics_cfg() -> Any:
    from yolodoctor.ulenv import quiet_ultralytics

    quiet_ultralytics()
    from ultralytics import cfg  # heavy: torch

    return cfg


def parse_kv(pairs: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Parse ``KEY=VALUE`` words into a dict of validated Ultralytics train arguments (user-given keys only)."""
    cfg = _ultralytics_cfg()
    defaults = cfg.DEFAULT_CFG_DICT
    out: dict[str, Any] = {}
    for word in pairs:
        key, sep, raw = word.partition("=")
        key = key.strip().lstrip("-")
        if not sep or not key:
            raise UsageError(f"expected KEY=VALUE, got {word!r} (for example: batch=32 workers=8)")
        if key not in defaults:
            close = _close_keys(key, defaults)
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise UsageError(f"unknown train argument {key!r}{hint}")
        if key in out:
            raise UsageError(f"train argument {key!r} given twice")
        out[key] = cfg.smart_value(raw) if raw != "" else None
    try:
        cfg.check_cfg(out)
        if out.get("imgsz") is not None:
            _check_imgsz(out["imgsz"])
    except (TypeError, ValueError) as e:
        raise UsageError(str(e).strip()) from None
    return out


def _check_imgsz(imgsz: Any) -> None:
    """Refuse an imgsz the trainer would refuse (check_cfg leaves it to the trainer's check_imgsz: 'abc', 640.5), with
    that same check, its rounding-to-stride warning silenced (the trainer repeats it)."""
    from ultralytics.utils import LOGGER
    from ultralytics.utils.checks import check_imgsz

    level = LOGGER.level
    LOGGER.setLevel(logging.ERROR)
    try:
        check_imgsz(imgsz, stride=32, floor=32, max_dim=1)
    finally:
        LOGGER.setLevel(level)


def _close_keys(key: str, defaults: dict) -> list[str]:
    import difflib

    return difflib.get_close_matches(key, list(defaults), n=2, cutoff=0.75)


def is_classify(user: dict[str, Any]) -> bool:
    """A classification training: a -cls model, or task=classify with a model whose name names no other task (the
    model's task wins over task=, as Ultralytics' model picks the trainer)."""
    stem = Path(str(user.get("model") or "")).stem
    if stem.endswith(("-seg", "-pose", "-obb")):
        return False
    return stem.endswith("-cls") or user.get("task") == "classify"


def effective(user: dict[str, Any]) -> dict[str, Any]:
    """Ultralytics' defaults overlaid with the user's arguments (and yolodoctor's offline-safe default model). A
    classification training trains at imgsz 224 where none is given, as ClassificationTrainer sets it."""
    cfg = _ultralytics_cfg()
    args = dict(cfg.DEFAULT_CFG_DICT)
    args["model"] = DEFAULT_CLS_MODEL if user.get("task") == "classify" else DEFAULT_MODEL
    if is_classify(user):
        args["imgsz"] = CLS_IMGSZ
    args.update(user)
    return args
