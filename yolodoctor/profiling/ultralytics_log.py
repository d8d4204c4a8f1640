"""What Ultralytics decides silently during a training, recorded as events: the warnings and choices it only logs.

Ultralytics' modules each bind the shared ``LOGGER`` by name (``from ultralytics.utils import LOGGER``), and that
logger drops warnings before any handler when ``YOLO_VERBOSE`` is off. So, for the training's duration, the ``LOGGER``
name of the modules that decide (the AMP check, AutoBatch, the RAM-cache guard, the file-speed check, the
task-aligned assigner, the trainer's OOM retry) is bound to a proxy that forwards every call unchanged and records the
messages in NOTED as ``ultralytics_log`` events. Nothing is parsed from the console; the user's log is unchanged.
"""

from __future__ import annotations

import contextlib
import importlib
import re
from collections.abc import Callable
from typing import Any

MODULES = ("ultralytics.utils.checks", "ultralytics.utils.autobatch", "ultralytics.data.base", "ultralytics.data.utils",
           "ultralytics.data.dataset", "ultralytics.data.split", "ultralytics.utils.tal", "ultralytics.engine.trainer")
# (kind, pattern) of the messages worth a record; the first group captures their figures
NOTED: tuple[tuple[str, re.Pattern], ...] = tuple((k, re.compile(p)) for k, p in (
    ("amp_passed", r"AMP: checks passed"),
    ("amp_skipped", r"checks skipped\. (.*?)(?: Setting|$)"),
    ("amp_failed", r"checks failed"),
    ("cache_refused", r"([\d.]+)GB RAM required to cache images .* only ([\d.]+)/([\d.]+)GB available"),
    ("files_fast", r"Fast image access .*?\((.*)\)"),
    ("files_slow", r"Slow image access detected \((.*?)\)"),
    ("autobatch_memory", r"AutoBatch: .*?([\d.]+)G total, ([\d.]+)G reserved, ([\d.]+)G available"),
    ("autobatch_chosen", r"AutoBatch: Using batch-size (\d+) for .*? ([\d.]+)G/([\d.]+)G \((\d+)%\)"),
    ("autobatch_default", r"AutoBatch: (.*?),? using default batch-size (\d+)"),
    ("assigner_per_image", r"out of memory in TaskAlignedAssigner with batch_size=(\d+) and max_num_obj=(\d+)"),
    ("oom_halved", r"out of memory with batch=(\d+)\. Reducing to batch=(\d+)"),
    # classification (ultralytics/data/dataset.py ClassificationDataset, data/utils.py check_cls_dataset, data/split.py)
    ("cls_classes_skipped", r"Skipping (\d+) samples from classes the model lacks: (.*)"),
    ("cache_disk_refused", r"Skipping caching images to disk, directory not writable"),
    ("cls_split_copied", r"Splitting (.*?) into (\d+)% train"),
    ("cls_classes_mismatch", r"found (\d+) images in (\d+) classes \(requires (\d+) classes"),
))
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def classify(text: str) -> tuple[str, list[str]] | None:
    """(kind, figures) of a message Ultralytics logs, or None for one not worth a record."""
    plain = _ANSI.sub("", text)
    for kind, pat in NOTED:
        m = pat.search(plain)
        if m:
            return kind, [g for g in m.groups() if g is not None]
    return None


class _Proxy:
    """Forwards everything to the logger; records the messages ``classify`` knows."""

    def __init__(self, logger: Any, note: Callable[[str, str, list[str], str], None]) -> None:
        self._logger, self._note = logger, note

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._logger, name)
        if name not in ("info", "warning", "error"):
            return attr

        def call(msg: Any = "", *args: Any, **kw: Any) -> Any:
            try:
                found = classify(str(msg))
                if found:
                    self._note(found[0], name, found[1], _ANSI.sub("", str(msg))[:400])
            except Exception:
                pass
            return attr(msg, *args, **kw)
        return call


class LogWatch:
    """Bind the proxies (``start``) and restore the modules' own logger (``stop``); idempotent."""

    def __init__(self, note: Callable[[str, str, list[str], str], None]) -> None:
        self.note = note
        self._saved: dict[str, Any] = {}

    def start(self) -> None:
        for name in MODULES:
            if name in self._saved:
                continue
            mod: Any  # an Ultralytics module, whose LOGGER is swapped
            try:
                mod = importlib.import_module(name)
            except Exception:
                continue
            logger = getattr(mod, "LOGGER", None)
            if logger is None or isinstance(logger, _Proxy):
                continue
            self._saved[name] = logger
            mod.LOGGER = _Proxy(logger, self.note)

    def stop(self) -> None:
        for name, logger in self._saved.items():
            with contextlib.suppress(Exception):
                mod: Any = importlib.import_module(name)
                mod.LOGGER = logger
        self._saved.clear()

    def __getstate__(self) -> dict[str, Any]:  # under DDP the callbacks are pickled into every rank
        return {"note": self.note, "_saved": {}}
