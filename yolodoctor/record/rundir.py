"""Run directories: created without ever overwriting (name, name-2, name-3, ...), written atomically."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import IO, Any

from yolodoctor.errors import InputError

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


def fresh_dir(path: Path) -> Path:
    """``path``, or ``path-2``, ``path-3``... : the first that does not exist."""
    n, candidate = 1, path
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}-{n}")
    return candidate


def latest_run(base: Path = DEFAULT_BASE) -> Path:
    """The run directory under ``base`` whose profile.json was written last (fix's and verify's own runs only where
    there is no other)."""
    runs = [p.parent for p in base.glob("*/profile.json")] if base.is_dir() else []
    runs = [r for r in runs if not r.name.startswith(("fix-", "trials"))] or runs
    if not runs:
        raise InputError(f"no run directory under {base}; give RUN_DIR or run `yolodoctor profile` first")
    return max(runs, key=lambda p: (p / "profile.json").stat().st_mtime)


def not_a_run_dir(run_dir: str | Path) -> str:
    """Why a path given as a run directory is not one: a file there, or nothing."""
    return (f"{run_dir} is a file, not a run directory" if Path(run_dir).exists() else
            f"run directory not found: {run_dir}")


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
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_json_atomic(path: str | Path, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, default=str, allow_nan=False) + "\n")


RESERVE = ".yolodoctor-reserve"
RESERVE_BYTES = 1 << 20  # profile.json is tens of kB; a MiB leaves room for the largest record
LOW_DISK_BYTES = 1 << 20


def reserve_space(run_dir: str | Path, nbytes: int = RESERVE_BYTES) -> bool:
    """Set aside ``nbytes`` in the run directory, so that the final record can still be written after the disk filled
    during the run (``release_space`` frees it just before). False when there was no room even for that."""
    path = Path(run_dir) / RESERVE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        return False
    try:
        os.posix_fallocate(fd, 0, nbytes)
        return True
    except OSError:
        os.close(fd)
        fd = -1
        release_space(run_dir)
        return False
    finally:
        if fd >= 0:
            os.close(fd)


def release_space(run_dir: str | Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(Path(run_dir) / RESERVE)


def low_disk(path: str | Path, threshold: int = LOW_DISK_BYTES) -> int | None:
    """Bytes free on the file system holding ``path`` when fewer than ``threshold`` remain, else None."""
    import shutil

    try:
        free = shutil.disk_usage(path).free
    except OSError:
        return None
    return free if free < threshold else None


def open_regular(path: str | os.PathLike[str], binary: bool = False) -> IO[Any]:
    """Open a file for reading only if it is a regular file: a run directory from elsewhere may hold a FIFO (reading
    would block forever) or a link to /dev/zero (endless) where a record should be. Raises OSError otherwise."""
    import stat

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens at once instead of waiting for a writer
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        os.set_blocking(fd, True)
        return open(fd, "rb") if binary else open(fd, encoding="utf-8", errors="replace")
    except BaseException:
        os.close(fd)
        raise
