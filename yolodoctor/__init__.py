"""yolodoctor: find out why an Ultralytics YOLO training run is slow, and fix it.

Importing this package is cheap: torch and ultralytics are imported only by the commands that need them.
"""

from pathlib import Path
from typing import Any

from yolodoctor.version import SCHEMA, __version__


def attach(model: Any, **kwargs: Any) -> Path:
    """Profile the next ``model.train()`` in this process; returns the run directory (see yolodoctor/attach.py)."""
    from yolodoctor.attach import attach as _attach

    return _attach(model, **kwargs)


__all__ = ["SCHEMA", "__version__", "attach"]
