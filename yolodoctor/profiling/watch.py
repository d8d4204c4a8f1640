"""What a command shows while a training it launched runs: how far the training is (read from the run's event stream
as it grows) and, where the command asks for it, the training process's own output.

The training process's stdout and stderr go through a pipe to the command, which keeps every byte in the run
directory's ``output.log`` and passes the lines to ``Watch.echo`` (a script's own output, or everything under
``--debug``); without an echo nothing of it reaches the terminal. A command sets what it wants for the trainings it
launches, including those launched deep inside (``fix --verify``'s trials), with ``watching(...)``.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

OUTPUT = "output.log"
# torch.profiler's kineto library prints its own log lines (profiler_start/stop, stages, "gpuGetDeviceCount failed")
# at this level and below; 6 is above its highest (USDT = 5), which silences them. Not set under --debug. (Ultralytics
# sets 5 when it is imported: the trace window sets 6 again before the profiler starts, profiling/trace.py.)
KINETO_QUIET = {"KINETO_LOG_LEVEL": "6"}


@dataclass(frozen=True)
class Watch:
    progress: Callable[[RunProgress], None] | None = None  # called a few times a second while a training runs
    echo: Callable[[str], None] | None = None  # the training process's output lines; None: kept in output.log only
    debug: bool = False  # --debug: torch's and the profiler's own log lines too


NOTHING = Watch()  # outside any watching(): no progress, the output kept in output.log only
_current: contextvars.ContextVar[Watch | None] = contextvars.ContextVar("yolodoctor_watch", default=None)


def current() -> Watch:
    return _current.get() or NOTHING


@contextlib.contextmanager
def watching(**changes: Any) -> Iterator[Watch]:
    """Within the block, trainings launched by ``profiling.runner.run_profile`` report to these callbacks."""
    watch = replace(current(), **changes)
    token = _current.set(watch)
    try:
        yield watch
    finally:
        _current.reset(token)


def child_env(env: dict[str, str], debug: bool) -> dict[str, str]:
    """The training process's environment: the profiler's own log silenced unless --debug (a value the user set is
    kept)."""
    if not debug:
        for k, v in KINETO_QUIET.items():
            env.setdefault(k, v)
    return env


# ---------------------------------------------------------------------------------------------------------------------
# progress, from the event stream

PHASES = {
    "run_start": "importing torch and Ultralytics",
    "imported": "building the model",
    "model_built": "Ultralytics' setup",
    "train_begin": "Ultralytics' setup: dataset, cache, loaders",
    "settings": "waiting for the first batch",
    "bounded": "stopping after the last step",
    "loader_capacity_start": "timing the loader alone",
    "loader_capacity": "writing the record",
    "train_end": "writing the record",
    "run_end": "done",
}


class RunProgress:
    """How far a training is, from its run directory's ``events.jsonl``, read incrementally (complete lines only)."""

    def __init__(self, run_dir: str | Path, events: str = "events.jsonl") -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / events
        self.offset = 0
        self.phase = "starting the training process"
        self.step = 0  # steps done
        self.limit: int | None = None  # the bound, where the run has one
        self.images = 0
        self.first_t: float | None = None
        self.last_t: float | None = None
        try:  # a bound given as --steps N (the default bound arrives as a steps_limit event)
            steps = json.loads((self.run_dir / "spec.json").read_text()).get("steps")
            self.limit = steps if isinstance(steps, int) and not isinstance(steps, bool) else None
        except (OSError, ValueError, AttributeError):
            pass

    def poll(self) -> RunProgress:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read(1 << 20)
        except OSError:
            return self
        end = data.rfind(b"\n")
        if end < 0:
            return self
        self.offset += end + 1
        for line in data[:end].splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if isinstance(e, dict):
                self._take(e)
        return self

    def _take(self, e: dict) -> None:
        kind = e.get("type")
        if kind == "step":
            self.step += 1
            t, n = e.get("t1"), e.get("images")
            if isinstance(t, (int, float)):
                if self.first_t is None:  # the rate counts the images after the first step's end
                    self.first_t = t
                else:
                    self.images += n if isinstance(n, int) else 0
                self.last_t = t
            self.phase = "training"
        elif kind in ("steps_limit", "steps_extended") and isinstance(e.get("steps"), int):
            self.limit = e["steps"]
        elif kind == "settings" and self.step:
            self.phase = "training"  # another train() call of a script
        elif kind in PHASES:
            self.phase = PHASES[kind]

    @property
    def images_per_s(self) -> float | None:
        if self.first_t is None or self.last_t is None or self.last_t - self.first_t < 1.0 or self.step < 3:
            return None
        return self.images / (self.last_t - self.first_t)

    def describe(self) -> str:
        if self.phase != "training":
            return self.phase + (f" (after {self.step} steps)" if self.step else "")
        of = f"/{self.limit}" if self.limit else ""
        rate = self.images_per_s
        return f"step {self.step}{of}" + (f", {rate:.1f} images/s" if rate else "")


# ---------------------------------------------------------------------------------------------------------------------
# the training process's output

_ANSI_ERASE = re.compile(r"\x1b\[K")


class OutputPump:
    """Reads the training process's output from a pipe on a thread: every byte into ``log_path``, each line (of a
    progress bar redrawn with carriage returns, its last frame) to ``echo``. Writing the log may fail (a full disk):
    the pipe is drained all the same, so the training never blocks on its output."""

    def __init__(self, stream: IO[bytes], log_path: Path, echo: Callable[[str], None] | None) -> None:
        self.stream, self.log_path, self.echo = stream, log_path, echo
        self.thread = threading.Thread(target=self._run, name="yolodoctor-output", daemon=True)

    def start(self) -> OutputPump:
        self.thread.start()
        return self

    def join(self, timeout: float = 2.0) -> None:
        """Wait for the end of the output (a process the training left behind may hold the pipe open: not forever)."""
        self.thread.join(timeout)

    def _run(self) -> None:
        with contextlib.ExitStack() as stack:
            stack.callback(self._close_stream)
            try:
                log: IO[bytes] | None = stack.enter_context(open(self.log_path, "ab"))
            except OSError:
                log = None
            pending = b""
            fd = self.stream.fileno()
            while True:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                if log is not None:
                    try:
                        log.write(chunk)
                        log.flush()
                    except OSError:  # a full disk: the log stops, the draining goes on
                        log = None
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    self._show(line)
                if len(pending) > 1 << 16:  # a progress bar that never ends its line: keep its last frame only
                    pending = pending[pending.rfind(b"\r") + 1:] if b"\r" in pending else pending[-4096:]
            if pending:
                self._show(pending)

    def _close_stream(self) -> None:
        with contextlib.suppress(OSError):
            self.stream.close()

    def _show(self, raw: bytes) -> None:
        if self.echo is None:
            return
        text = _ANSI_ERASE.sub("", raw.decode("utf-8", errors="replace"))
        frames = [f for f in text.split("\r") if f.strip()]
        if not frames:
            return
        with contextlib.suppress(Exception):  # showing a line must never stop draining the pipe
            self.echo(frames[-1].rstrip())
