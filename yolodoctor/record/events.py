"""The live event stream of a run directory: JSON lines, one record per event, flushed as written.

Every record has ``type`` and ``t`` (time.monotonic(), the system-wide clock the sampler also uses). The training
process writes ``events.jsonl`` (``events-rank{R}.jsonl`` under DDP), the sampler ``samples.jsonl``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


def _append(path: Path) -> TextIO:
    """The writer's line-buffered handle; EventWriter.close() closes it."""
    return open(path, "a", buffering=1, encoding="utf-8")


class EventWriter:
    """Append-only JSONL writer; safe to call from several threads; never raises (a full disk loses events, not
    the training: ``dropped`` counts what could not be written)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._fh = _append(self.path)
        self.dropped = 0

    def write(self, type_: str, **fields: Any) -> None:
        rec = {"type": type_, "t": fields.pop("t", None) or time.monotonic(), **fields}
        line = json.dumps(_clean(rec), default=str, allow_nan=False) + "\n"
        with self._lock:
            try:
                self._fh.write(line)
                self._fh.flush()
            except (OSError, ValueError):
                self.dropped += 1

    def close(self) -> None:
        with self._lock:
            try:
                self._fh.flush()
                os.fsync(self._fh.fileno())
            except (OSError, ValueError):
                pass
            with contextlib.suppress(OSError):
                self._fh.close()


def read_events(path: str | Path) -> Iterator[dict[str, Any]]:
    """Records of a JSONL file (or of FILE.gz where only the compressed copy exists, as in recorded fixtures);
    a torn last line (the writer was killed mid-write) is skipped. Only a regular file is read (a run directory
    from elsewhere may hold a FIFO or a link to /dev/zero), and a damaged file yields what can be read of it."""
    import zlib

    from yolodoctor.record.rundir import open_regular

    path = Path(path)
    gz = not path.exists() and Path(f"{path}.gz").exists()
    try:
        raw = open_regular(f"{path}.gz" if gz else path, binary=gz)
    except (OSError, ValueError):  # missing, not a regular file, or a name with a NUL byte
        return
    with contextlib.ExitStack() as stack:
        fh = stack.enter_context(raw)
        if gz:
            import gzip

            fh = stack.enter_context(gzip.open(raw, "rt", encoding="utf-8", errors="replace"))
        try:
            for line in fh:
                line = line.strip()
                if not line:
                    continue
                try:
                    rec = json.loads(line)
                except (json.JSONDecodeError, RecursionError):
                    continue
                if isinstance(rec, dict) and "type" in rec:
                    yield rec
        except (OSError, EOFError, zlib.error):  # a truncated or corrupt .gz: what came before stands
            return
