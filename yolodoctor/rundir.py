"""Run directories: created without ever overwriting (name, name-2, name-3, ...), written atomically."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

DEFAULT_BASE = Path("runs") / "yolodoctor"


def new_run_dir(base: str | Path | None = None, name: str = "profile") -> Path:
    """Create and return a fresh directory ``base/name`` (or ``name-N``); never reuses an existing path."""
    base = Path(base) if base is not None else DEFAULT_BASE
    base.mkdir(parents=True, exist_ok=True)
    for n in range(1, 100_000):
        path = base / (name if n == 1 else f"{name}-{n}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise OSError(f"no free run directory name under {base}")


def exclusive_dir(path: str | Path) -> Path:
    """Create exactly ``path`` (its parents as needed); an existing path is refused, never reused."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.mkdir()
    return path


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write next to ``path`` and rename into place, so a reader never sees a half-written file. The file gets the
    ordinary permissions of the umask (mkstemp alone would make it 0600)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_json_atomic(path: str | Path, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, default=str, allow_nan=False) + "\n")
