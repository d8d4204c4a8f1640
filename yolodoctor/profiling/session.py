"""One profiling session per training process: the event writer, the step recorder, the trace window and the loader
capacity measurement, configured from the run directory's spec.json.

The same session serves the three ways of profiling:
  - `profile KEY=VALUE`: the child process (child.py) attaches it to the YOLO model it builds;
  - `profile -- COMMAND`: sitecustomize (inject/) registers hooks.py's module-level callbacks with Ultralytics'
    default callbacks, and the session is created lazily in each process from YOLODOCTOR_RUN_DIR;
  - `yolodoctor.attach(model)` in a notebook.
Under DDP each rank gets its own event stream (events-rank{R}.jsonl), because each rank is its own process.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from yolodoctor.profiling.recorder import Recorder
from yolodoctor.profiling.trace import TraceWindow
from yolodoctor.record import bounds
from yolodoctor.record.events import EventWriter
from yolodoctor.record.profile import EVENTS, SPEC
from yolodoctor.record.rundir import write_json_atomic

SHORT_PROBE = 0.1  # a short training's loader is timed for at most this share of its own time
MIN_PROBE_S = 1.0  # ... and not at all where that is under this

ROLES = "roles.json"
ENV_RUN_DIR = "YOLODOCTOR_RUN_DIR"


def rank() -> int:
    try:
        return int(os.environ.get("RANK", "-1"))
    except ValueError:
        return -1


def world_size() -> int:
    """Processes of the DDP training this one belongs to (WORLD_SIZE, set by torch.distributed.run); 1 alone."""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def agree_max(value: int) -> int:
    """The largest of every DDP rank's ``value`` (each rank calls this at the same point of its training), through
    torch.distributed's object gather, which works over gloo and NCCL alike; ``value`` where no process group runs."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return value
    got: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(got, int(value))
    return max(int(v) for v in got if v is not None)


def events_name(r: int) -> str:
    return EVENTS if r in (-1, 0) else f"events-rank{r}.jsonl"


class Session:
    def __init__(self, run_dir: str | Path, spec: dict[str, Any] | None = None) -> None:
        self.run = Path(run_dir)
        self.spec = spec if spec is not None else json.loads((self.run / SPEC).read_text())
        self.rank = rank()
        self.events = EventWriter(self.run / events_name(self.rank))
        self.events.write("run_start", pid=os.getpid(), tid=threading.get_native_id(), rank=self.rank)
        steps = self.spec.get("steps")
        self.trace = (TraceWindow(self.run, on_done=lambda r: self.events.write("trace", **r),
                                  quiet=not self.spec.get("profiler_log"))
                      if self.spec.get("trace", True) and self.rank in (-1, 0) else None)
        self.recorder = Recorder(self.events, steps_limit=steps if isinstance(steps, int) else None,
                                 rank=self.rank, on_settings=self._on_settings, on_workers=self._write_roles,
                                 trace=self.trace, on_end=self._on_train_end)
        self.ended = False
        self.short = False  # the training is no longer than a bounded profile: measured whole (_on_settings)
        self.trained_from: float | None = None  # when its settings came (the training's setup done)

    # ------------------------------------------------------------------ hooks from the recorder
    def _write_roles(self, roles: dict[int, str]) -> None:
        """Each rank names its own loader workers, in its own file (roles.rank_roles_name beside roles.json)."""
        from yolodoctor.profiling.roles import rank_roles_name

        name = ROLES if self.rank in (-1, 0) else rank_roles_name(self.rank)
        try:
            write_json_atomic(self.run / name, {str(k): v for k, v in roles.items()})
        except OSError as e:  # a full disk loses the roles file, never the training (the sampler guesses roles)
                self.events.write("roles_error", error=f"{type(e).__name__}: {e}"[:300])

    def _on_settings(self, settings: dict) -> None:
        if self.spec.get("steps") == "auto":
            workers, pf = settings.get("workers") or 0, settings.get("prefetch_factor")
            self.recorder.steps_limit = bounds.default_steps(workers, pf)
            # DDP ranks must stop at the same step (each waits for the others at every gradient all-reduce): a bound
            # one rank moved on its own evidence would leave the others waiting, so under DDP it never moves
            ddp = world_size() > 1
            if ddp:  # each rank's default follows its own workers: all take the largest
                self.recorder.steps_limit = agree_max(self.recorder.steps_limit)
            self.recorder.extend_to = None if ddp else bounds.max_steps(workers, pf)
            planned = (settings.get("epochs") or 0) * (settings.get("batches_per_epoch") or 0)
            if self.spec.get("whole_if_short") and not ddp and 0 < planned <= self.recorder.steps_limit:
                # a training no longer than a bounded profile is measured whole, in its own time (no wrapping past
                # its end), and its loader timed only as long as it can afford (_time_loader)
                self.short = True
                self.events.write("steps_limit", steps=None, extend_to=None, planned=planned,
                                  rule=f"the whole training: its {planned} steps are no more than a bounded profile's "
                                       f"{self.recorder.steps_limit}")
                self.recorder.steps_limit, self.recorder.extend_to = None, None
            else:
                self.events.write("steps_limit", steps=self.recorder.steps_limit, extend_to=self.recorder.extend_to,
                                  rule="SETTLE + one prefetch depth + two windows"
                                       + (" (DDP: the same for every rank)" if ddp else
                                          ", more while the queue still drains"))
        self.trained_from = time.monotonic()
        if self.trace is not None and not self.trace.done:
            self.trace.cuda = str(settings.get("device", "")).startswith("cuda")
            limit = self.recorder.steps_limit  # a bounded run reaches it whatever the epochs (recorder.endless)
            planned = (settings.get("epochs") or 0) * (settings.get("batches_per_epoch") or 0)
            last = limit or planned
            if last:
                self.trace.place_at_end(last - 1)
                nb = settings.get("batches_per_epoch") or 0
                if not limit and 0 < nb < self.trace.active:  # a whole run's last epoch is shorter than the window:
                    self.trace.active, self.trace.start = nb, last - nb  # trace that epoch's steps only
            if settings.get("compile_requested") == "reduce-overhead":
                self.trace.skip("compile='reduce-overhead' (CUDA graphs): no profiler trace (the profiler cannot see "
                                "inside a graph replay)")
                self.events.write("trace", skipped=self.trace.skipped)

    def _on_train_end(self, trainer: Any) -> None:
        """After the steps and before Ultralytics closes its loaders: time the train loader alone. A bounded run whose
        process ends with the training (``recorder.ends_process``) then ends here, its record complete: Ultralytics'
        teardown after this point (reloading the checkpoint, which a bounded run does not write) measures nothing."""
        self._time_loader(trainer)
        if self.recorder.ends_process and self.recorder.bounded:
            self._end_process(trainer)

    def _end_process(self, trainer: Any) -> None:
        self._close_loaders(trainer, "train_loader", "test_loader")
        self.end("complete", None)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

    def _time_loader(self, trainer: Any) -> None:
        seconds = float(self.spec.get("loader_seconds", 8.0) or 0)
        if seconds <= 0 or not self.spec.get("loader_capacity", True) or self.rank not in (-1, 0):
            return
        if self.short:  # a short training measured whole: its loader timed for at most SHORT_PROBE of its length
            took = time.monotonic() - (self.trained_from or time.monotonic())
            seconds = min(seconds, SHORT_PROBE * took)
            if seconds < MIN_PROBE_S:
                self.events.write("loader_capacity", skipped=f"a {took:.0f} s training: timing its loader alone "
                                  f"would cost more than {SHORT_PROBE:.0%} of it")
                return
        if self.spec.get("loader_capacity_done"):
            return
        self.spec["loader_capacity_done"] = True  # once per process: a second train() reuses the figure
        from yolodoctor.profiling import loader

        self.events.write("loader_capacity_start", mosaic=self.recorder.last_mosaic)
        try:
            self.events.write("loader_capacity", **loader.measure(trainer, mosaic=self.recorder.last_mosaic,
                                                                  seconds=seconds))
        except Exception as e:  # the measurement is extra: its failure is a fact, not a failed training
            self.events.write("loader_capacity", error=f"{type(e).__name__}: {e}"[:300])

    # ------------------------------------------------------------------ lifecycle
    def attach(self, model: Any) -> Session:
        self.recorder.attach(model)
        return self

    def end(self, status: str, reason: str | None) -> None:
        if self.ended:
            return
        self.ended = True
        if status != "complete" and reason is not None and reason.startswith("crashed:"):
            reason = blame_loader_worker(self.recorder.trainer(), reason)
        self._close_trace(reason)
        if status != "complete":
            self._close_loaders(self.recorder.trainer(), "train_loader")
        self.recorder.finish()
        self.events.write("run_end", status=status, reason=reason, steps=self.recorder.total_steps,
                          bounded=self.recorder.bounded)
        self.events.close()

    def _close_loaders(self, trainer: Any, *names: str) -> None:
        """Shut the named loaders' workers down before the process ends: left to exit, multiprocessing kills the
        daemonic workers first and the pin-memory thread, still reading from them, prints a ConnectionResetError
        traceback into the log (seen on the H200 when the monitor quit a run)."""
        for name in names:
            loader: Any = getattr(trainer, name, None)
            try:
                if callable(getattr(loader, "close", None)):
                    loader.close()
            except Exception as e:  # the run is ending anyway: record, never raise from here
                self.events.write("loader_close_error", error=f"{type(e).__name__}: {e}"[:300])

    def _close_trace(self, reason: str | None) -> None:
        """A training that ends inside the trace window (crash, OOM, Ctrl-C) leaves torch.profiler running, and the
        process then dies of SIGSEGV at exit (seen on the CPU with torch 2.14): stop it, and say the window is lost."""
        t = self.trace
        if t is None or t.prof is None or t.done:
            return
        prof, t.prof, t.done = t.prof, None, True
        with contextlib.suppress(Exception):  # the record matters more than the trace
            prof.__exit__(None, None, None)
        t.skipped = f"the training ended inside the trace window ({reason or 'without a reason'})"
        self.events.write("trace", skipped=t.skipped)


def blame_loader_worker(trainer: Any, reason: str) -> str:
    """``reason`` (a crash) told as the death of a DataLoader worker where one of ``trainer``'s loaders lost a worker
    to a signal or a non-zero exit: that death is the cause whatever error reached the training first (torch's own
    "worker is killed" check, or a ConnectionResetError or broken pipe from the pin-memory thread, depending on
    timing). SIGKILL is named as the likely work of the system's out-of-memory killer."""
    for name in ("train_loader", "test_loader"):
        iterator = getattr(getattr(trainer, name, None), "iterator", None)
        for worker in getattr(iterator, "_workers", None) or ():
            try:
                code = worker.exitcode  # reaps a dead worker (it is this process's child); None while it runs
            except Exception:
                continue
            if not code:
                continue
            if code < 0:
                try:
                    how = f"was killed by signal {signal.Signals(-code).name}"
                except ValueError:
                    how = f"was killed by signal {-code}"
                if code == -signal.SIGKILL:
                    how += " (often the system's out-of-memory killer)"
            else:
                how = f"exited with code {code}"
            seen = reason.removeprefix("crashed:").strip()
            return f"crashed: DataLoader worker (pid {worker.pid}) of the {name} {how}; the training saw: {seen}"
    return reason


def classify_error(e: BaseException) -> tuple[str, int]:
    from yolodoctor.profiling.signals import Terminated

    if isinstance(e, KeyboardInterrupt):
        return "interrupted", 130
    if isinstance(e, Terminated):
        return "terminated", 143
    from ultralytics.utils import remove_colorstr  # the training process has it loaded

    text = remove_colorstr(f"{type(e).__name__}: {e}")  # Ultralytics colours its errors for the terminal
    if "out of memory" in text.lower() or type(e).__name__ == "OutOfMemoryError":
        return "out-of-memory: " + text[:300], 1
    return "crashed: " + text[:300], 1
