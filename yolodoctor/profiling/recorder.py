"""Ultralytics callbacks that record every training step into the event stream.

Timing: data wait = previous ``on_train_batch_end`` -> next ``on_train_batch_start`` and compute = start -> end, on the
host clock (time.monotonic). On CUDA the recorder also brackets each step with CUDA events and reads them (and the loss)
only once the GPU has passed them (``Event.query()``), so it adds no synchronisation to the hot path.

Bounding: after ``steps_limit`` steps the recorder sets ``trainer.stop`` and replaces, on this trainer instance only,
the validation, final evaluation and plotting that Ultralytics would run after a stop, so that a bounded profile really
ends at its last step. A bounded profile measures as many steps as it needs whatever the user's run length: its first
epoch runs on past the epoch's last batch (the loader wraps around the dataset, full batches only) until the bound, so
that a one-epoch training of a small dataset is measured in its own phase (the same epochs, hence mosaic, warm-up,
optimizer and learning rate as the user's run) rather than cut at its end. With ``extend_to``, the bound moves up to
that many steps while the queue's occupancy shows it still draining, or past the warm-up's ramp of the gradient
accumulation where it reaches beyond it (record/bounds.py). In script mode the checkpoint is still written (one save of
last.pt): ``Model.train()`` requires one, and a program that trains twice goes on to its second call. Where the process
ends with the training (``ends_process``: `profile KEY=VALUE` and the trials of fix), a bounded run writes no checkpoint
and the session ends the process at the training's end.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yolodoctor.profiling.ultralytics_log import LogWatch
from yolodoctor.record.events import EventWriter

if TYPE_CHECKING:
    from yolodoctor.profiling.trace import TraceWindow

EVENTS = ("on_pretrain_routine_start", "on_train_start", "on_train_epoch_start", "on_train_batch_start",
          "on_train_batch_end", "on_train_epoch_end", "on_fit_epoch_end", "on_train_end")


def _scalar(x: Any) -> float | None:
    try:
        return float(x.item() if hasattr(x, "item") else x)
    except Exception:
        return None


def allocator_counters(cuda: Any) -> dict[str, int]:
    """The caching allocator's counters for this step, host-side (no synchronisation): resting size
    (``mem_allocated``: weights, gradients, optimizer state once the activations are freed), the step's own peak
    (``mem_allocated_peak``, valid when the peak is reset after each step) and what the allocator holds
    (``mem_reserved``). One read of the nested stats: ``memory_allocated()``, ``max_memory_allocated()`` and
    ``memory_reserved()`` each build and flatten the whole ~200-entry stats dict in Python, which cost about 1 ms
    a step on the H200 (bench/recorder_cost.py)."""
    stats = cuda.memory_stats_as_nested_dict()
    alloc = stats.get("allocated_bytes", {}).get("all", {})
    reserved = stats.get("reserved_bytes", {}).get("all", {})
    return {"mem_allocated": int(alloc.get("current", 0)), "mem_allocated_peak": int(alloc.get("peak", 0)),
            "mem_reserved": int(reserved.get("current", 0)), "mem_reserved_peak": int(reserved.get("peak", 0))}


class Recorder:
    def __init__(self, events: EventWriter, *, steps_limit: int | None = None, rank: int = -1,
                 on_settings: Callable[[dict], None] | None = None, on_workers: Callable[[dict], None] | None = None,
                 trace: TraceWindow | None = None, on_end: Callable[[Any], None] | None = None,
                 extend_to: int | None = None) -> None:
        self.events = events
        self.steps_limit = steps_limit
        self.extend_to = extend_to  # the most steps a bound may move to while the queue still drains
        self._timing: list[dict] = []  # host-side timings of this train() call's steps, for the extension's check
        self.ready: int | None = None
        self._oom_seen = 0
        self._log = LogWatch(self._noted)
        self._workers, self._prefetch = 0, None
        self._accumulate: int | None = None  # nominal batches per optimizer step, and the warm-up's iterations
        self._warmup: int | None = None
        self.rank = rank
        self.on_settings = on_settings
        self.on_workers = on_workers
        self.on_end = on_end
        self.trace = trace
        self.train_index = -1
        self.steps = 0  # steps of this train() call
        self.total_steps = 0
        self.bounded = False
        self.ends_process = False  # the process ends with this training (args mode): a bounded run skips the checkpoint
        self.cost_s = 0.0  # seconds spent in the step callbacks, this train() call
        self._reset_epoch_state()
        self._pending: deque = deque()
        self._cuda = False
        self._roles: dict[int, str] = {}
        self.tid = threading.get_native_id()
        self.last_mosaic: bool | None = None
        self.trainer: Callable[[], Any] = lambda: None  # the current trainer (a weak reference), once training began

    # ---------------------------------------------------------------- wiring
    def attach(self, target: Any) -> Recorder:
        """Add the callbacks to a YOLO model (``add_callback``) or to a trainer's callback lists."""
        for name in EVENTS:
            fn = getattr(self, name)
            if hasattr(target, "add_callback"):
                target.add_callback(name, fn)
            else:
                target.setdefault(name, []).append(fn)
        return self

    def _reset_epoch_state(self) -> None:
        self.i = 0
        self.last_end: float | None = None

    # ---------------------------------------------------------------- callbacks
    def on_pretrain_routine_start(self, trainer: Any) -> None:
        self._begin(trainer)

    def _begin(self, trainer: Any) -> None:
        """A new train() call. Ultralytics runs on_pretrain_routine_start on rank 0 (or a single process) only, so
        the other DDP ranks begin here from on_train_start, which every rank runs."""
        self.trainer = weakref.ref(trainer)  # for the session's clean-up after an interrupted run
        self.train_index += 1
        self.steps = 0
        self.bounded = False
        self.cost_s = 0.0
        self._timing = []
        self._oom_seen = 0
        self.events.write("train_begin", train_index=self.train_index, rank=self.rank, tid=self.tid,
                          trainer=type(trainer).__name__)
        self._log.start()  # before the AMP check, AutoBatch and the dataset builds of the trainer's setup

    def _noted(self, kind: str, level: str, figures: list[str], text: str) -> None:
        self.events.write("ultralytics_log", kind=kind, level=level, figures=figures, text=text,
                          train_index=self.train_index)

    def on_train_start(self, trainer: Any) -> None:
        import torch

        if self.trainer() is not trainer:  # a DDP rank other than 0: no on_pretrain_routine_start came
            self._begin(trainer)
        self._cuda = getattr(trainer.device, "type", "cpu") == "cuda"
        settings = effective_settings(trainer)
        self._workers, self._prefetch = settings.get("workers") or 0, settings.get("prefetch_factor")
        self._accumulate, self._warmup = settings.get("accumulate"), settings.get("warmup_iterations")
        self.events.write("settings", train_index=self.train_index, settings=settings)
        if self.on_settings:
            self.on_settings(settings)
        self._torch = torch

    def on_train_epoch_start(self, trainer: Any) -> None:
        retries = getattr(trainer, "_oom_retries", 0) or 0
        if retries > self._oom_seen:  # the epoch restarts: Ultralytics halved the batch after an out-of-memory
            self.events.write("oom_retry", epoch=trainer.epoch, train_index=self.train_index, retry=retries,
                              batch=trainer.batch_size, after_steps=self.i)
        self._oom_seen = retries
        self._reset_epoch_state()
        if self.steps_limit and not self.bounded:
            endless(trainer.train_loader)
        self.epoch_t0 = time.monotonic()
        self.last_end = self.epoch_t0
        self.last_mosaic = _mosaic_on(trainer)
        self.events.write("epoch_start", epoch=trainer.epoch, train_index=self.train_index, mosaic=self.last_mosaic,
                          batch=trainer.batch_size)

    def on_train_batch_start(self, trainer: Any) -> None:
        c0 = time.perf_counter()
        now = time.monotonic()
        self.t_start = now
        self.wait = now - self.last_end if self.last_end is not None else None
        if self.i == 0:
            self._note_workers(trainer)
        self.ready = queued(getattr(trainer.train_loader, "iterator", None))
        if self._cuda:
            self.ev_start = self._torch.cuda.Event(enable_timing=True)
            self.ev_start.record()
        self.cost_s += time.perf_counter() - c0  # the recorder's own time in the hot path (the trace's is not)
        if self.trace is not None:
            self.trace.before_step(self.steps)

    def on_train_batch_end(self, trainer: Any) -> None:
        c0 = time.perf_counter()
        now = time.monotonic()
        loader = trainer.train_loader
        nb = len(loader)
        bs = trainer.batch_size
        # this process's batches: under DDP the loader's batch is the rank's share and its sampler the rank's shard
        lbs = getattr(loader, "batch_size", None) or bs
        sampler = getattr(loader, "sampler", None)
        n = len(sampler) if sampler is not None and hasattr(sampler, "__len__") else len(loader.dataset)
        images = getattr(loader, "_yd_last_n", None) or (
            lbs if self.i % nb < nb - 1 else max(n - (nb - 1) * lbs, 1))
        rec = {"epoch": trainer.epoch, "i": self.i, "step": self.total_steps, "n": self.steps,
               "train_index": self.train_index,
               "t0": self.t_start, "t1": now, "wait": self.wait, "compute": now - self.t_start, "images": images,
               "batch": bs, "accumulate": trainer.accumulate, "warmup": self._in_warmup(trainer, nb),
               "lr": _scalar(trainer.optimizer.param_groups[0]["lr"]) if trainer.optimizer else None}
        if self.ready is not None:
            rec["ready"] = self.ready
        if self.i >= nb:
            rec["wrapped"] = True  # past the user's epoch: the measurement wrapped around the dataset
        if self.trace is not None and self.trace.prof is not None:
            rec["traced"] = True
        loss: Any = getattr(trainer, "loss", None)
        if self._cuda:
            cuda = self._torch.cuda
            rec.update(allocator_counters(cuda))
            cuda.reset_peak_memory_stats()
            ev_end = cuda.Event(enable_timing=True)
            ev_end.record()
            self._pending.append((rec, loss.detach() if hasattr(loss, "detach") else loss, self.ev_start, ev_end))
            self._flush_ready()
        else:
            rec["loss"] = _scalar(loss) if loss is not None else None
            self._emit(rec)
        self.cost_s += time.perf_counter() - c0
        if self.trace is not None:
            self.trace.after_step(self.steps)
        self.i += 1
        self.steps += 1
        self.total_steps += 1
        self.last_end = time.monotonic()
        if self.steps_limit and not self.bounded:
            self._timing.append({k: rec[k] for k in ("n", "t0", "t1", "wait", "compute", "images", "ready",
                                                     "accumulate") if k in rec})
            if self.extend_to and self.steps == self._check_at(self.steps_limit):
                self._maybe_extend(self.steps_limit, self.extend_to)
            if self.steps >= self.steps_limit:
                self._bound(trainer)

    def on_train_epoch_end(self, trainer: Any) -> None:
        self._flush_ready(wait=True)
        self.events.write("epoch_end", epoch=trainer.epoch, train_index=self.train_index, steps=self.i,
                          seconds=time.monotonic() - self.epoch_t0)

    def on_fit_epoch_end(self, trainer: Any) -> None:  # after validation and saving
        self.events.write("fit_epoch_end", epoch=trainer.epoch, train_index=self.train_index,
                          metrics={k: _scalar(v) for k, v in (trainer.metrics or {}).items()},
                          nan_recoveries=getattr(trainer, "nan_recovery_attempts", 0),
                          oom_retries=getattr(trainer, "_oom_retries", 0), batch=trainer.batch_size)
        self._note_workers(trainer)

    def on_train_end(self, trainer: Any) -> None:
        self._log.stop()
        self._flush_ready(wait=True)
        self.events.write("train_end", train_index=self.train_index, steps=self.steps, bounded=self.bounded,
                          recorder_s=round(self.cost_s, 6), grad_scale=grad_scale(trainer))
        if self.on_end:
            self.on_end(trainer)

    # ---------------------------------------------------------------- internals
    def finish(self) -> None:
        """Flush what is pending (called on the way out, also after an exception)."""
        self._log.stop()
        with contextlib.suppress(Exception):
            self._flush_ready(wait=True)

    def _emit(self, rec: dict) -> None:
        loss = rec.get("loss")
        if loss is not None and not math.isfinite(loss):
            self.events.write("nonfinite_loss", step=rec["step"], epoch=rec["epoch"], loss=loss)
        self.events.write("step", **rec)

    def _flush_ready(self, wait: bool = False) -> None:
        while self._pending:
            rec, loss, ev0, ev1 = self._pending[0]
            if not wait and not ev1.query():
                return
            if wait:
                ev1.synchronize()
            self._pending.popleft()
            rec["gpu_ms"] = ev0.elapsed_time(ev1)
            rec["loss"] = _scalar(loss) if loss is not None else None
            self._emit(rec)

    def _in_warmup(self, trainer: Any, nb: int) -> bool:
        try:
            nw = trainer._get_warmup_iterations(nb)
        except Exception:
            return False
        return bool(nw) and (self.i + nb * trainer.epoch) <= nw

    def _note_workers(self, trainer: Any) -> None:
        roles = dict(self._roles)
        for loader, role in ((getattr(trainer, "train_loader", None), "train_worker"),
                             (getattr(trainer, "test_loader", None), "val_worker")):
            it = getattr(loader, "iterator", None)
            for w in getattr(it, "_workers", None) or ():
                if getattr(w, "pid", None):
                    roles[w.pid] = role
        if roles != self._roles:
            self._roles = roles
            self.events.write("workers", roles={str(k): v for k, v in roles.items()})
            if self.on_workers:
                self.on_workers(roles)

    def _check_at(self, limit: int) -> int:
        """The step at which the window is judged: before the trace window where one is still to come (so that an
        extension moves it to the new end), else at the bound (``limit``)."""
        t = self.trace
        if t is not None and not t.done and t.prof is None and t.start is not None:
            return min(limit, t.start)
        return limit

    def _maybe_extend(self, limit: int, extend_to: int) -> None:
        """Move the bound (``limit``) while the evidence says the queue is still draining, up to ``extend_to`` steps,
        or past the warm-up's ramp of the gradient accumulation where ``extend_to`` reaches beyond it
        (record/bounds.py)."""
        from yolodoctor.record import bounds

        depth = bounds.prefetch_depth(self._workers, self._prefetch)
        traced = limit - self._check_at(limit)
        w = bounds.window(self._timing, depth, accumulate=self._accumulate, warmup=self._warmup)
        ramp = w["warmup_needs"] if w["warmup_needs"] and limit + w["warmup_needs"] <= extend_to else 0
        needs = max(0 if w["valid"] else (w["needs"] or 0), ramp)  # the ramp's end only where the bound reaches it
        if not needs or limit >= extend_to:
            return
        new = min(extend_to, limit + needs)
        self.events.write("steps_extended", at=self.steps, steps=new, why=w["why"] or w["warmup"])
        self.steps_limit = new
        if traced and self.trace is not None:
            self.trace.place_at_end(new - 1)

    def _bound(self, trainer: Any) -> None:
        """Stop after this step and skip the validation, final evaluation and plots that follow (this trainer only)."""
        self.bounded = True
        trainer.stop = True
        trainer.validate = lambda: (trainer.metrics or {}, None)
        trainer.final_eval = lambda: None
        trainer.plot_metrics = lambda: None
        trainer.args.plots = False
        if self.ends_process:  # nothing reads a bounded run's weights; the session ends the process at train end
            trainer.save_model = lambda: False
        self.events.write("bounded", step=self.total_steps, train_index=self.train_index)


def queued(it: Any) -> int | None:
    """Batches a multi-process DataLoader iterator holds ready to be consumed (its result queue plus the batches that
    arrived out of order), read host-side without waiting; None for a single-process loader or another iterator."""
    task_info, q = getattr(it, "_task_info", None), getattr(it, "_data_queue", None)
    if task_info is None or q is None:
        return None
    try:
        return int(q.qsize()) + sum(1 for v in list(task_info.values()) if len(v) == 2)
    except (NotImplementedError, OSError, RuntimeError):  # qsize() is not implemented everywhere (macOS)
        return None


def endless(loader: Any) -> None:
    """Make this loader instance's epoch run on past its last batch (an InfiniteDataLoader's persistent iterator
    repeats the dataset): the user's ``len(loader)`` batches first, then full batches only (a partial last batch is a
    new shape that a compiled or cudnn-tuned model would re-tune for). ``_yd_last_n`` holds the size of the batch just
    yielded. Loaders without a persistent ``iterator`` are left as they are."""
    cls = type(loader)
    if not hasattr(loader, "iterator") or getattr(cls, "_yd_endless", False):
        return

    def __iter__(self: Any) -> Iterator[Any]:
        if self.iterator is None:
            self.iterator = self._get_iterator()
        full = getattr(self, "batch_size", None)
        for k in itertools.count():
            batch = next(self.iterator)
            n = _batch_size(batch)
            if k >= len(self) and full and n is not None and n < full:
                continue
            self._yd_last_n = n
            yield batch

    with contextlib.suppress(TypeError):  # a class that cannot be swapped: the epoch ends where the user's does
        loader.__class__ = type(f"Endless{cls.__name__}", (cls,), {"__iter__": __iter__, "_yd_endless": True})


def _batch_size(batch: Any) -> int | None:
    img = batch.get("img") if isinstance(batch, dict) else None
    shape = getattr(img, "shape", None)
    return int(shape[0]) if shape else None


def _mosaic_on(trainer: Any) -> bool:
    """Mosaic runs unless its probability is 0 or the run is in its last ``close_mosaic`` epochs; never for a dataset
    without it (classification's ClassificationDataset: its args still carry mosaic and close_mosaic, unused)."""
    ds = getattr(getattr(trainer, "train_loader", None), "dataset", None)
    if ds is not None and not hasattr(ds, "close_mosaic"):
        return False
    a = trainer.args
    epoch = getattr(trainer, "epoch", getattr(trainer, "start_epoch", 0))
    closing = bool(a.close_mosaic) and epoch >= trainer.epochs - a.close_mosaic
    return bool(getattr(a, "mosaic", 0)) and not closing


def effective_settings(trainer: Any) -> dict[str, Any]:
    """What Ultralytics actually runs with, read off the trainer after its setup."""
    import torch

    args = trainer.args
    model = trainer.model
    loader = trainer.train_loader
    first = next((p for p in model.parameters() if p.dim() == 4), None)
    ds = getattr(loader, "dataset", None)
    compiled = hasattr(model, "_orig_mod") or type(model).__name__ == "OptimizedModule"
    return {
        "device": str(trainer.device),
        "data": str(args.data) if args.data else None,  # what script mode's dataset probes read (commands/profile)
        "task": getattr(args, "task", None),
        "model": str(args.model) if getattr(args, "model", None) else None,
        "batch": trainer.batch_size,
        "batch_requested": getattr(trainer, "_yd_batch_requested", args.batch),
        "imgsz": args.imgsz,
        "epochs": trainer.epochs,
        "workers_requested": args.workers,
        "workers": getattr(loader, "num_workers", None),
        "prefetch_factor": getattr(loader, "prefetch_factor", None),
        "pin_memory": getattr(loader, "pin_memory", None),
        "batches_per_epoch": len(loader) if loader is not None else None,
        "images_per_epoch": len(ds) if ds is not None else None,
        "amp_requested": args.amp,
        "amp": bool(trainer.amp),
        "precision": "bf16" if args.amp == "bf16" and trainer.amp else ("fp16" if trainer.amp else "fp32"),
        "grad_scaler": bool(getattr(trainer.scaler, "is_enabled", lambda: False)()),
        "compile_requested": args.compile,
        "compile_active": compiled,
        "channels_last": bool(first is not None and first.is_contiguous(memory_format=torch.channels_last)
                              and not first.is_contiguous()),
        "accumulate": trainer.accumulate,
        "nbs": args.nbs,
        "optimizer": type(trainer.optimizer).__name__ if trainer.optimizer is not None else None,
        "lr0": _initial_lr(trainer.optimizer),
        "seed": args.seed,
        "warmup_iterations": trainer._get_warmup_iterations(len(loader)) if loader is not None else None,
        "close_mosaic": args.close_mosaic,
        "mosaic": _mosaic_on(trainer),
        "cache": _cache_active(ds),
        "deterministic": args.deterministic,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "tf32_cudnn": torch.backends.cudnn.allow_tf32,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "val": args.val,
        "torch": torch.__version__,
        **_asked(trainer),
        "cache_requested": _cache_asked(args.cache),
        "mosaic_buffer": _mosaic_buffer(ds),
        "cuda_launch_blocking": os.environ.get("CUDA_LAUNCH_BLOCKING"),
        "anomaly_detection": torch.is_anomaly_enabled(),
    }


def _asked(trainer: Any) -> dict[str, Any]:
    """What the user asked for where Ultralytics overwrote it before any callback ran (workers=0 on the CPU, the
    batch AutoBatch chose): read back from the run's args.yaml, which Ultralytics saves first."""
    try:
        import yaml

        saved = yaml.safe_load((Path(trainer.save_dir) / "args.yaml").read_text()) or {}
    except Exception:
        return {}
    return {"workers_asked": saved.get("workers"), "batch_asked": saved.get("batch")}


def _cache_asked(cache: Any) -> str | None:
    c = str(cache).lower() if cache not in (None, False) else None
    return "ram" if c in ("true", "ram") else c if c in ("disk",) else None


def _cache_active(ds: Any) -> str | None:
    """The cache the train dataset really uses: detection's ``cache`` ('ram', 'disk' or None), classification's
    ``cache_ram`` / ``cache_disk`` flags (ClassificationDataset has no ``cache``; it turns disk off on a read-only
    folder)."""
    if ds is None:
        return None
    if hasattr(ds, "cache_ram") or hasattr(ds, "cache_disk"):
        return "ram" if getattr(ds, "cache_ram", False) else "disk" if getattr(ds, "cache_disk", False) else None
    return getattr(ds, "cache", None)


def _mosaic_buffer(ds: Any) -> bool | None:
    """Whether mosaic picks its other images from the recent-images buffer (Ultralytics turns it off with
    cache='ram': mosaic then picks from the whole dataset); None where no mosaic transform is found."""
    stack = [getattr(ds, "transforms", None)]
    while stack:
        t = stack.pop()
        if t is None:
            continue
        if hasattr(t, "buffer_enabled"):
            return bool(t.buffer_enabled)
        stack += [*list(getattr(t, "transforms", None) or [])[::-1], getattr(t, "mosaic", None)]
    return None


def _initial_lr(optimizer: Any) -> float | None:
    """The learning rate the optimizer was built with (Ultralytics resolves it for optimizer='auto' from the run's
    iterations, hence its epochs and dataset size)."""
    groups = getattr(optimizer, "param_groups", None) or []
    lr = groups[0].get("initial_lr", groups[0].get("lr")) if groups else None
    return _scalar(lr) if lr is not None else None


def grad_scale(trainer: Any) -> float | None:
    """The fp16 GradScaler's scale at the end of training (one read, one sync), None where none runs (bf16, fp32,
    CPU). It starts at 2**16 and halves at every optimizer step whose gradients overflow, a step it skips; it doubles
    only after 2000 clean steps (torch.amp defaults), so in a short run 16 - log2(scale) counts the skipped steps."""
    scaler = getattr(trainer, "scaler", None)
    try:
        return float(scaler.get_scale()) if scaler is not None and scaler.is_enabled() else None
    except Exception:
        return None
