"""The sampler's loop and its records: beside the training process, a few times a second, one JSON object per line
(``samples.jsonl``), flushed at once, so that the file stays readable up to its last sample.

Every record has ``type`` (``sampler_start``, ``sample``, ``sampler_error``, ``sampler_pause``/``sampler_resume``,
``sampler_end``), ``t`` (``time.monotonic()``, the step timestamps' clock) and ``wall`` (``time.time()``); their
fields: docs/measuring.md. A rate covers the interval since the previous sample; what cannot be known is null.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from typing import IO, Any

import psutil

from yolodoctor.api.nvml import Nvml
from yolodoctor.numbers import finite as _finite
from yolodoctor.profiling.gpu import PCIE_S, UTIL_SAMPLES_S, GpuSection, RankGpus
from yolodoctor.profiling.procfs import ProcReader, rate
from yolodoctor.profiling.proctree import RESCAN_S, THREAD_SCAN_S, ProcessTree

SCHEMA = 1
MAX_ERROR_RECORDS = 50


def _cpu_total_busy(t: Any) -> tuple[float, float]:
    """psutil's own definition (cpu_percent): guest time is already in user; busy excludes idle and iowait."""
    total = sum(t) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)
    return total, total - t.idle - getattr(t, "iowait", 0.0)


class Sampler:
    """Takes one sample per call of :meth:`sample`; :meth:`run` is the timed loop. Every source is injectable:
    ``psutil_mod`` (system CPU/memory/disk, the process tree and command lines), ``proc`` (a
    :class:`~yolodoctor.profiling.procfs.ProcReader`) and ``nvml`` (an :class:`~yolodoctor.api.nvml.Nvml`; None
    opens pynvml)."""

    def __init__(self, pid: int, *, tid: int | None = None, roles_path: str | os.PathLike[str] | None = None,
                 gpu_uuid: str | None = None, psutil_mod: Any = None, proc: ProcReader | None = None,
                 nvml: Nvml | None = None, environ: dict[str, str] | None = None,
                 rescan_s: float = RESCAN_S, thread_scan_s: float = THREAD_SCAN_S,
                 util_samples_s: float = UTIL_SAMPLES_S, pcie_s: float = PCIE_S) -> None:
        self.ps = psutil_mod if psutil_mod is not None else psutil
        self.proc = proc if proc is not None else ProcReader()
        self.nvml = nvml if nvml is not None else Nvml.open()
        self.pid = pid
        self.tid = tid
        self.tree = ProcessTree(pid, tid=tid, roles_path=roles_path, ps=self.ps, proc=self.proc, rescan_s=rescan_s,
                                thread_scan_s=thread_scan_s)
        self.gpu = GpuSection(self.nvml, gpu_uuid, environ, util_samples_s=util_samples_s, pcie_s=pcie_s)
        self.rank_gpus = RankGpus(self.nvml)
        self._cpu_prev: Any = None
        self._disk_prev: Any = None
        self._last_t: float | None = None
        self._self_cpu_prev: tuple[float, float] | None = None
        self.errors: dict[str, str] = {}

    def target_alive(self) -> bool:
        """False once the target has exited (a zombie waiting for its parent counts as exited) or its pid is reused."""
        return self.tree.alive()

    def start_record(self, now: float | None = None, wall: float | None = None) -> dict[str, Any]:
        """The ``sampler_start`` record; also takes the first readings, so that the first sample has rates."""
        now = time.monotonic() if now is None else now
        wall = time.time() if wall is None else wall
        rec: dict[str, Any] = {
            "type": "sampler_start", "schema": SCHEMA, "t": now, "wall": wall,
            "pid": self.pid, "tid": self.tid, "sampler_pid": os.getpid(),
            "target_alive": self.target_alive(), "target_cmdline": self.tree.cmdline(),
            "roles_file": self.tree.roles.path, "cpu_count": self.ps.cpu_count() or None,
            "clk_tck": self.proc.clk_tck, "proc_source": "proc" if self.tree.fast else "psutil", "gpu": None,
        }
        rec.update(self.gpu.start())
        self.sample(now, wall)  # primes every delta; the result is discarded
        return rec

    # -- one sample -----------------------------------------------------------------------------------------------

    def sample(self, now: float, wall: float | None = None) -> dict[str, Any]:
        """One ``sample`` record at monotonic time ``now``. A section that fails is null; nothing raises."""
        wall = time.time() if wall is None else wall
        dt = now - self._last_t if self._last_t is not None else None
        rec: dict[str, Any] = {"type": "sample", "t": now, "wall": wall,
                               "dt": round(dt, 4) if dt is not None else None}
        self.errors = {}
        rec["cpu"] = self._section("cpu", self._cpu)
        procs = self._section("proc", lambda: self.tree.sample(now, wall))
        rec["proc"], rec["children"], rec["roles"] = procs if procs else (None, None, None)
        ranks = self.tree.ranks(rec["children"] or [])
        if ranks:  # a DDP training: each rank's process, workers and GPU (absent for a single process)
            self._section("rank_gpus", lambda: self.rank_gpus.annotate(ranks, now))
            rec["ranks"] = ranks
        if rec["proc"] is not None:
            rec["proc"]["thread"], rec["proc"]["threads_top"] = self._section(
                "thread", lambda: self.tree.threads(now)) or (None, None)
        rec["mem"] = self._section("mem", self._mem)
        rec["disk"] = self._section("disk", lambda: self._disk(dt))
        rec["gpu"] = self._section("gpu", lambda: self.gpu.read(now, wall)) if self.gpu.handle is not None else None
        cpu_now = time.process_time()
        if self._self_cpu_prev is not None:
            rec["self_cpu"] = rate(cpu_now - self._self_cpu_prev[0], now - self._self_cpu_prev[1], 100.0, 2)
        else:
            rec["self_cpu"] = None
        self._self_cpu_prev = (cpu_now, now)
        if self.errors:
            rec["errors"] = dict(self.errors)
        self._last_t = now
        return rec

    def _section(self, name: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as e:  # a bug or an unforeseen platform quirk: lose this field, keep sampling
            self.errors[name] = f"{type(e).__name__}: {e}"
            return None

    def _cpu(self) -> dict[str, Any]:
        times = self.ps.cpu_times(percpu=True)
        prev, self._cpu_prev = self._cpu_prev, times
        out: dict[str, Any] = {"count": len(times), "percpu": None, "total": None, "user": None, "system": None,
                               "iowait": None, "steal": None}
        if prev is None or len(prev) != len(times):
            return out
        per = []
        d_total = d_busy = 0.0
        d = {"user": 0.0, "system": 0.0, "iowait": 0.0, "steal": 0.0}
        for a, b in zip(prev, times, strict=False):
            ta, ba = _cpu_total_busy(a)
            tb, bb = _cpu_total_busy(b)
            dtot, dbusy = tb - ta, bb - ba
            per.append(round(min(max(100.0 * dbusy / dtot, 0.0), 100.0), 1) if dtot > 0 else 0.0)
            d_total += dtot
            d_busy += dbusy
            for k in d:
                d[k] += getattr(b, k, 0.0) - getattr(a, k, 0.0)
        out["percpu"] = per
        if d_total > 0:
            out["total"] = round(100.0 * d_busy / d_total, 1)
            for k, v in d.items():
                out[k] = round(max(100.0 * v / d_total, 0.0), 1)
        return out

    # system memory and disk

    def _mem(self) -> dict[str, Any]:
        vm = self.ps.virtual_memory()
        out: dict[str, Any] = {"total": int(vm.total), "used": int(vm.used), "available": int(vm.available),
                               "percent": float(vm.percent), "shm_used": None, "shm_total": None}
        try:
            shm = self.ps.disk_usage("/dev/shm")
            out["shm_used"], out["shm_total"] = int(shm.used), int(shm.total)
        except (OSError, AttributeError):
            pass
        return out

    def _disk(self, dt: float | None) -> dict[str, Any] | None:
        io = self.ps.disk_io_counters()
        prev, self._disk_prev = self._disk_prev, io
        if io is None:
            return None
        if prev is None:
            return {"read_bps": None, "write_bps": None, "read_iops": None, "write_iops": None}
        return {
            "read_bps": rate(io.read_bytes - prev.read_bytes, dt, ndigits=None),
            "write_bps": rate(io.write_bytes - prev.write_bytes, dt, ndigits=None),
            "read_iops": rate(io.read_count - prev.read_count, dt),
            "write_iops": rate(io.write_count - prev.write_count, dt),
        }

    # -- the loop -------------------------------------------------------------------------------------------------

    def run(self, out: IO[str], hz: float = 5.0, stop: Callable[[], str | None] = lambda: None,
            wait: Callable[[float], None] | None = None, clock: Callable[[], float] = time.monotonic,
            duty: tuple[float, float] | None = None) -> str:
        """Write start, samples every 1/hz s on a fixed grid (no drift: a late tick is skipped, not shifted), and an
        end record. ``stop()`` returns a reason to stop, or None; ``wait(seconds)`` sleeps (and may return early).

        ``duty=(on_s, off_s)`` (the sampler's ``--duty``) samples for on_s seconds, then
        reads nothing for off_s, and so on, writing ``sampler_pause``/``sampler_resume`` at each switch: the steps of
        one training run then fall in sampled and unsampled blocks, so the sampler's cost is measured within a run."""
        wait = wait or time.sleep
        period = 1.0 / hz
        t_start = clock()
        cpu_start = time.process_time()
        write_record(out, self.start_record(t_start))
        n = overruns = errors = 0
        sampling = True
        next_t = t_start + period
        reason: str | None = None
        while True:
            delay = next_t - clock()
            if delay > 0:
                wait(delay)
            reason = stop()
            if reason is None and not self.target_alive():
                reason = "target exited"
            if reason is not None:
                break
            now = clock()
            if now < next_t:  # woken early but not stopped: sleep the rest
                continue
            if duty is not None:
                on = (now - t_start) % (duty[0] + duty[1]) < duty[0]
                if on != sampling:
                    sampling = on
                    write_record(out, {"type": "sampler_resume" if on else "sampler_pause", "t": now,
                                       "wall": time.time()})
                if not on:
                    next_t += period
                    continue
            try:
                rec = self.sample(now)
            except Exception as e:  # sample() guards its sections; this is a last line of defence
                rec = {"type": "sampler_error", "t": now, "wall": time.time(), "error": f"{type(e).__name__}: {e}"}
            if rec.get("errors") and errors < MAX_ERROR_RECORDS:
                errors += 1
                write_record(out, {"type": "sampler_error", "t": now, "wall": rec["wall"], "error": rec["errors"]})
            write_record(out, rec)
            n += rec["type"] == "sample"
            next_t += period
            late = clock() - next_t
            if late >= 0:
                skipped = int(late // period) + 1
                overruns += skipped
                next_t += skipped * period
        end = clock()
        elapsed = end - t_start
        own = time.process_time() - cpu_start
        write_record(out, {
            "type": "sampler_end", "t": end, "wall": time.time(), "reason": reason,
            "samples": n, "overruns": overruns, "hz": hz, "elapsed_s": round(elapsed, 3),
            "self_cpu_s": round(own, 3), "self_cpu_pct": round(100.0 * own / elapsed, 2) if elapsed > 0 else None,
        })
        return reason


def write_record(out: IO[str], rec: dict[str, Any]) -> None:
    """One JSON line, flushed at once (strict JSON: a NaN or infinity that slipped through is written as null)."""
    try:
        line = json.dumps(rec, separators=(",", ":"), allow_nan=False, default=str)
    except ValueError:
        line = json.dumps(_finite(rec), separators=(",", ":"), allow_nan=False, default=str)
    out.write(line + "\n")
    out.flush()


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every complete record of a sampler file; a torn last line (the sampler was killed mid-write) is dropped."""
    return list(iter_records(path))


def iter_records(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    from yolodoctor.record.rundir import open_regular

    with open_regular(path) as f:  # a FIFO or device where a record should be: OSError, not a hang
        for line in f:
            if not line.endswith("\n"):
                return
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                yield rec
