"""Helpers shared by the reliability tests (the doctor never harms the patient); conftest.py holds the
fixtures. The CLI in a subprocess (real exit codes) and in process (fast, for fuzzing, each case bounded in time),
the one-line error contract, and snapshots of the user's files."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OBSERVER = HERE / "observer"  # a sitecustomize that records losses and fp32 weights (test_equivalence.py)

# One training, the same everywhere it is run: deterministic, seeded, loader in the training process (the trainer
# forces workers=0 on the CPU anyway), 8 steps of batch 4 at imgsz 64, one epoch with its validation.
TRAIN = ["model=yolo11n.yaml", "imgsz=64", "batch=4", "epochs=1", "workers=0", "deterministic=True", "seed=0",
         "plots=False"]


def env(**extra: str) -> dict[str, str]:
    return {**os.environ, "YOLO_OFFLINE": "1", "YOLO_VERBOSE": "False", **extra}


def yd(*args, cwd, timeout: float = 300, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`yolodoctor ARGS` in a subprocess: the real exit code, stdout and stderr."""
    return subprocess.run([sys.executable, "-m", "yolodoctor", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=env(**(extra_env or {})))


def yd_popen(*args, cwd, extra_env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "yolodoctor", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=cwd, env=env(**(extra_env or {})))


class Hang(BaseException):
    """Raised by ``bounded`` when a case runs past its time (a BaseException, so the CLI cannot swallow it)."""


@contextlib.contextmanager
def bounded(seconds: float):
    """Fail a case that runs longer than ``seconds`` (SIGALRM in the main thread): a hang is a failure, not a stall."""
    def alarm(signum, frame):
        raise Hang(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def cli(argv: list[str], seconds: float = 20.0) -> tuple[int, str, str]:
    """The click CLI in process (``yolodoctor.cli.main``), its output captured: (exit code, stdout, stderr)."""
    from yolodoctor.cli import main

    out, err = io.StringIO(), io.StringIO()
    code: int | str | None = 0
    with bounded(seconds), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([str(a) for a in argv])
        except SystemExit as e:
            code = e.code
    return (code if isinstance(code, int) else (0 if code is None else 2)), out.getvalue(), err.getvalue()


def one_line_error(err: str) -> bool:
    """The error contract: one clear line on stderr, no traceback."""
    lines = [line for line in err.splitlines() if line.strip()]
    return "Traceback" not in err and len(lines) == 1 and lines[0].startswith("yolodoctor: error:") \
        and "internal error" not in lines[0]


def snapshot(root: Path) -> dict[str, str]:
    """Every file under ``root`` with its SHA-1 (Ultralytics' own label caches, *.cache, left out)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.name.endswith(".cache"):
            out[str(p.relative_to(root))] = hashlib.sha1(p.read_bytes()).hexdigest()
    return out


def wait_for(pred, timeout: float = 120.0, every: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(every)
    return False


def has_step(events: Path) -> bool:
    try:
        return '"type": "step"' in events.read_text()
    except OSError:
        return False
