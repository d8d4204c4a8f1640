"""Datasets for yolodoctor: synthetic YOLO datasets (``synth``).

The names below are loaded lazily, so that importing this package does not import OpenCV.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from yolodoctor.datasets.synth import DatasetInfo, make_dataset

__all__ = ["DatasetInfo", "make_dataset"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from yolodoctor.datasets import synth

        return getattr(synth, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
