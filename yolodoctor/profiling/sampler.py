"""The side-process sampler of ``yolodoctor profile``.

It runs *beside* the training process, never inside it: it cannot slow the training thread through the GIL, and it
outlives a training that crashes. It samples a few times a second and writes one JSON object per line, flushed at
once, so that whatever happens to either process the file stays readable up to its last sample::

    python -m yolodoctor.profiling.sampler --pid PID --out FILE.jsonl [--hz 5] [--gpu-uuid UUID]
                                           [--roles FILE.json] [--tid TID]

Records (every one has ``type``, ``t`` = ``time.monotonic()`` of the system-wide CLOCK_MONOTONIC that the training
process also uses for its step timestamps, and ``wall`` = ``time.time()``):

- ``sampler_start``: the target, the rate, the machine's CPUs and the GPU matched by UUID (or ``"gpu": null`` and
  ``"gpu_unavailable": reason``);
- ``sample``: ``cpu`` (per core, iowait), ``proc`` (the training process, with the CPU of its training *thread*),
  ``children`` (every descendant, classified by role), ``roles`` (per-role totals), ``mem``, ``disk``, ``gpu``;
- ``sampler_error``: a section that raised unexpectedly (that section is null in the sample; the sampler carries on);
- ``sampler_end``: the last record, with ``reason`` ("target exited", "stopped", "interrupted") and the sampler's own
  CPU cost.

Rates (CPU %, bytes/s) cover the interval since the previous sample; a value that cannot be known (first sight of a
process, a failed NVML call) is null, never a guess. Use :func:`start_sampler` / :func:`stop_sampler` from Python and
:func:`read_records` to read a file back.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import psutil

from yolodoctor.api.nvml import Nvml, decode_throttle_reasons, throttle_reason_names, visible_gpus

SCHEMA = 1
ROLES = ("train_worker", "val_worker", "compile_worker", "other")
# torch/_inductor/compile_worker/subproc_pool.py (torch 2.x) starts its sidecar as
#   [sys.executable, ".../torch/_inductor/compile_worker/__main__.py", "--pickler=...", "--kind=fork", ...]
# and the sidecar forks its ProcessPoolExecutor workers, which keep that command line. "-m" launches and older
# torch spell the module name, which also contains the marker.
COMPILE_WORKER_MARKERS = ("torch._inductor.compile_worker", "compile_worker")
RESCAN_S = 1.0  # how often the process tree is listed again (psutil's children() reads every /proc/PID/stat)
THREAD_SCAN_S = 1.0  # how often every thread of the target is read for ``threads_top`` when --tid is given
# Measured on an H200 (driver 580): nvmlDeviceGetSamples costs ~2.9 ms of CPU a call, the PCIe pair ~2 ms of CPU and
# 42 ms of wall time (each counter is measured over 20 ms); every other query ~0.1-0.2 ms. The driver keeps many
# seconds of utilisation samples and returns all since the last timestamp, so reading them once a second loses none.
UTIL_SAMPLES_S = 1.0
PCIE_S = 1.0
TOP_THREADS = 5
MAX_ERROR_RECORDS = 50


# ---------------------------------------------------------------------------------------------------------------------
# /proc reader (Linux): per-thread CPU, and a cheap per-process path (3x cheaper than psutil's)


@dataclass(frozen=True)
class ThreadStat:
    tid: int
    name: str
    ticks: int  # utime + stime, in clock ticks
    core: int | None  # the CPU it last ran on


@dataclass(frozen=True)
class ProcStat:
    pid: int
    name: str
    state: str  # R, S, D, Z, ...
    ppid: int
    ticks: int  # utime + stime of all its threads, in clock ticks
    num_threads: int
    starttime: int  # clock ticks after boot: with the pid, identifies the process
    rss_pages: int


def _stat_fields(raw: bytes) -> tuple[str, list[bytes]]:
    """The name and the fields after it of a /proc stat line; the name may hold spaces and parentheses, so the
    fields start after the *last* ')'. ``rest[0]`` is field 3 (state): field n is ``rest[n - 3]``."""
    r = raw.rindex(b")")
    return raw[raw.index(b"(") + 1:r].decode(errors="replace"), raw[r + 2:].split()


def parse_stat(raw: bytes, tid: int) -> ThreadStat | None:
    """One /proc/PID/task/TID/stat line."""
    try:
        name, rest = _stat_fields(raw)
        ticks = int(rest[11]) + int(rest[12])  # fields 14 utime, 15 stime
        core = int(rest[36]) if len(rest) > 36 else None  # field 39 processor
    except (ValueError, IndexError):
        return None
    return ThreadStat(tid, name, ticks, core)


def parse_proc_stat(raw: bytes, pid: int) -> ProcStat | None:
    """One /proc/PID/stat line (fields 3 state, 4 ppid, 14 utime, 15 stime, 20 num_threads, 22 starttime, 24 rss)."""
    try:
        name, rest = _stat_fields(raw)
        return ProcStat(pid, name, rest[0].decode(), int(rest[1]), int(rest[11]) + int(rest[12]), int(rest[17]),
                        int(rest[19]), int(rest[21]))
    except (ValueError, IndexError, UnicodeDecodeError):
        return None


class ProcReader:
    """Reads ``{root}/PID/stat``, ``{root}/PID/io`` and ``{root}/PID/task/TID/stat``; ``root`` is injectable for
    tests. Every read returns None when the file is gone (the process or thread exited) or unreadable."""

    def __init__(self, root: str | os.PathLike[str] = "/proc", clk_tck: int | None = None,
                 page_size: int | None = None) -> None:
        self.root = os.fspath(root)
        self.clk_tck = clk_tck or _clk_tck()
        self.page_size = page_size or _page_size()

    def _read(self, path: str) -> bytes | None:
        # os.open/os.read: half the cost of open() (no file object); these files are well under one page
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return None
        try:
            return os.read(fd, 4096)
        except OSError:
            return None
        finally:
            os.close(fd)

    def thread_stat(self, pid: int, tid: int) -> ThreadStat | None:
        raw = self._read(f"{self.root}/{pid}/task/{tid}/stat")
        return parse_stat(raw, tid) if raw else None

    def tids(self, pid: int) -> list[int]:
        try:
            return [int(n) for n in os.listdir(f"{self.root}/{pid}/task") if n.isdigit()]
        except OSError:
            return []

    def boottime(self) -> float | None:
        """Seconds since boot on the clock of /proc's ``starttime`` (CLOCK_BOOTTIME), or None off Linux."""
        try:
            return time.clock_gettime(time.CLOCK_BOOTTIME)
        except (AttributeError, OSError):
            return None

    def process(self, pid: int) -> ProcStat | None:
        raw = self._read(f"{self.root}/{pid}/stat")
        return parse_proc_stat(raw, pid) if raw else None

    def io(self, pid: int) -> dict[str, int] | None:
        """``read_bytes``/``write_bytes`` (what reached storage) and ``rchar`` (every read() call, cache hits too)."""
        raw = self._read(f"{self.root}/{pid}/io")  # needs ptrace access: None for other users' processes
        if not raw:
            return None
        out: dict[str, int] = {}
        for line in raw.splitlines():
            k, _, v = line.partition(b":")
            if k in _IO_KEYS:
                try:
                    out[k.decode()] = int(v)
                except ValueError:
                    pass
        return out


_IO_KEYS = {b"rchar", b"read_bytes", b"write_bytes"}


def _page_size() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return 4096


def _clk_tck() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (AttributeError, ValueError, OSError):
        return 100


# ---------------------------------------------------------------------------------------------------------------------
# roles


def role_from_cmdline(cmdline: list[str] | None) -> str | None:
    """The role a command line gives away by itself (only torch inductor's compile workers do), else None."""
    if not cmdline:
        return None
    joined = " ".join(cmdline)
    return "compile_worker" if any(m in joined for m in COMPILE_WORKER_MARKERS) else None


def load_roles(path: str | os.PathLike[str]) -> dict[int, str] | None:
    """``{"<pid>": role}`` as written by the training process; unknown roles read as "other". None if unreadable."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    out: dict[int, str] = {}
    for k, v in data.items():
        try:
            pid = int(k)
        except (TypeError, ValueError):
            continue
        out[pid] = v if v in ROLES else "other"
    return out


# ---------------------------------------------------------------------------------------------------------------------
# the sampler


def _rate(delta: float | None, dt: float | None, scale: float = 1.0, ndigits: int | None = 1) -> float | None:
    if delta is None or not dt or dt <= 0:
        return None
    v = delta / dt * scale
    if not math.isfinite(v):
        return None
    v = max(v, 0.0)  # counters never run backwards; a reset (pid reuse, wrap) must not read as negative
    return round(v, ndigits) if ndigits is not None else int(v)


def _cpu_total_busy(t: Any) -> tuple[float, float]:
    """psutil's own definition (cpu_percent): guest time is already in user; busy excludes idle and iowait."""
    total = sum(t) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)
    return total, total - t.idle - getattr(t, "iowait", 0.0)


@dataclass
class _ProcState:
    proc: Any  # psutil.Process
    starttime: int | None = None  # /proc starttime at first read (fast path): a different one means a reused pid
    ppid: int | None = None  # as listed at the last rescan (psutil's ppid() re-checks pid reuse: costly per tick)
    cpu_s: float | None = None
    read_bytes: int | None = None
    write_bytes: int | None = None
    read_chars: int | None = None
    t: float | None = None
    cmd_role: str | None = None
    cmd_checked_age: float = 0.0  # process age (s) when its cmdline was read: re-read once if it was still young


class Sampler:
    """Takes one sample per call of :meth:`sample`; :meth:`run` is the timed loop.

    Every source is injectable: ``psutil_mod`` (system CPU/memory/disk, the process tree and command lines), ``proc``
    (a :class:`ProcReader`: per-thread CPU, and per-process CPU/RSS/IO where it can read the target, since reading
    /proc directly costs a third of psutil's per-process reads; elsewhere psutil's) and ``nvml`` (an
    :class:`~yolodoctor.api.nvml.Nvml`; None opens pynvml).
    """

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
        self.roles_path = os.fspath(roles_path) if roles_path else None
        self.gpu_uuid = gpu_uuid
        self.rescan_s = rescan_s
        self.thread_scan_s = thread_scan_s
        self.util_samples_s = util_samples_s
        self.pcie_s = pcie_s
        self._next_util_samples = -math.inf
        self._next_pcie = -math.inf
        self._skip = (self.ps.NoSuchProcess, self.ps.AccessDenied, self.ps.ZombieProcess)
        try:
            self.target: Any = self.ps.Process(pid)
        except self._skip:
            self.target = None
        self._main = _ProcState(self.target) if self.target is not None else None
        first = self.proc.process(pid) if self.target is not None else None
        self.fast = first is not None  # /proc readable for the target: the cheap per-process path
        if self._main is not None:
            try:
                self._main.ppid = self.target.ppid()
            except self._skip:
                pass
            if first is not None:
                self._main.starttime = first.starttime
        self._bt: float | None = None  # boot time (s) at this sample and at the last one
        self._last_bt: float | None = None
        self._children: dict[int, _ProcState] = {}
        self._own_pid = os.getpid()
        self._next_rescan = -math.inf
        self._roles_file: dict[int, str] = {}
        self._roles_key: tuple[int, int, int] | None = None
        self._threads_prev: dict[int, tuple[int, float]] = {}
        self._next_thread_scan = -math.inf
        self._cpu_prev: Any = None
        self._disk_prev: Any = None
        self._last_t: float | None = None
        self._last_wall: float | None = None
        self._self_cpu_prev: tuple[float, float] | None = None
        self.errors: dict[str, str] = {}
        # GPU
        self.gpu_handle: Any = None
        self.gpu_index: int | None = None
        self.gpu_unavailable: str | None = None
        self.gpu_match: str | None = None
        self._throttle_names = throttle_reason_names(getattr(self.nvml, "_lib", None)) if self.nvml.available else {}
        self._util_last_ts = 0
        self._select_gpu(environ)

    # -- setup ----------------------------------------------------------------------------------------------------

    def _select_gpu(self, environ: dict[str, str] | None) -> None:
        if not self.nvml.available:
            self.gpu_unavailable = self.nvml.unavailable_reason or "NVML unavailable"
            return
        if self.gpu_uuid:
            hit = self.nvml.handle_by_uuid(self.gpu_uuid)
            if hit is None:
                self.gpu_unavailable = f"no NVML GPU has UUID {self.gpu_uuid}"
                return
            self.gpu_index, self.gpu_handle = hit
            self.gpu_match = "uuid"
            return
        gpus = self.nvml.gpus()
        vis = visible_gpus(gpus, environ)
        if not vis:
            self.gpu_unavailable = "no GPU visible" if not gpus else "no GPU visible under CUDA_VISIBLE_DEVICES"
            return
        hit = self.nvml.handle_by_uuid(vis[0].uuid) if vis[0].uuid else None
        if hit is None:
            h = self.nvml.call("nvmlDeviceGetHandleByIndex", vis[0].index)
            hit = (vis[0].index, h) if h is not None else None
        if hit is None:
            self.gpu_unavailable = "NVML lists a GPU but gives no handle for it"
            return
        self.gpu_index, self.gpu_handle = hit
        self.gpu_match = "first_visible"

    def target_alive(self) -> bool:
        """False once the target has exited (a zombie waiting for its parent counts as exited) or its pid is reused."""
        if self.target is None:
            return False
        if self.fast:
            ps = self.proc.process(self.pid)
            return ps is not None and ps.state not in ("Z", "X") and ps.starttime == self._main.starttime
        try:
            return bool(self.target.is_running()) and self.target.status() != self.ps.STATUS_ZOMBIE
        except self._skip:
            return False

    def start_record(self, now: float | None = None, wall: float | None = None) -> dict[str, Any]:
        """The ``sampler_start`` record; also takes the first readings, so that the first sample has rates."""
        now = time.monotonic() if now is None else now
        wall = time.time() if wall is None else wall
        rec: dict[str, Any] = {
            "type": "sampler_start", "schema": SCHEMA, "t": now, "wall": wall,
            "pid": self.pid, "tid": self.tid, "sampler_pid": os.getpid(),
            "target_alive": self.target_alive(), "target_cmdline": None,
            "roles_file": self.roles_path, "cpu_count": self.ps.cpu_count() or None,
            "clk_tck": self.proc.clk_tck, "proc_source": "proc" if self.fast else "psutil", "gpu": None,
        }
        if self.target is not None:
            try:
                rec["target_cmdline"] = self.target.cmdline()
            except self._skip:
                pass
        if self.gpu_handle is not None:
            info = self.nvml.info(self.gpu_index or 0, self.gpu_handle).to_dict()
            info["match"] = self.gpu_match
            rec["gpu"] = info
            rec["gpu_driver"] = self.nvml.driver_version()
            first = self.nvml.utilization_samples(self.gpu_handle, 0)  # drain the driver's backlog
            if first:
                self._util_last_ts = max(ts for ts, _ in first)
        rec["gpu_unavailable"] = self.gpu_unavailable if self.gpu_handle is None else None
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
        self._bt = self.proc.boottime() if self.fast else None
        rec["cpu"] = self._section("cpu", self._cpu)
        procs = self._section("proc", lambda: self._procs(now, wall))
        rec["proc"], rec["children"], rec["roles"] = procs if procs else (None, None, None)
        if rec["proc"] is not None:
            rec["proc"]["thread"], rec["proc"]["threads_top"] = self._section(
                "thread", lambda: self._threads(now)) or (None, None)
        rec["mem"] = self._section("mem", self._mem)
        rec["disk"] = self._section("disk", lambda: self._disk(dt))
        rec["gpu"] = self._section("gpu", lambda: self._gpu(now, wall)) if self.gpu_handle is not None else None
        cpu_now = time.process_time()
        if self._self_cpu_prev is not None:
            rec["self_cpu"] = _rate(cpu_now - self._self_cpu_prev[0], now - self._self_cpu_prev[1], 100.0, 2)
        else:
            rec["self_cpu"] = None
        self._self_cpu_prev = (cpu_now, now)
        if self.errors:
            rec["errors"] = dict(self.errors)
        self._last_t, self._last_wall, self._last_bt = now, wall, self._bt
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
        for a, b in zip(prev, times):
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

    # processes

    def _reload_roles(self) -> bool:
        if not self.roles_path:
            return False
        try:
            st = os.stat(self.roles_path)
        except OSError:
            return False
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        if key == self._roles_key:
            return False
        roles = load_roles(self.roles_path)
        if roles is None:  # half-written by a writer that does not rename: try again next tick
            return False
        self._roles_key = key
        self._roles_file = roles
        return True

    def _rescan(self, now: float) -> None:
        self._next_rescan = now + self.rescan_s
        try:
            found = self.target.children(recursive=True)
        except self._skip:  # the listing itself failed (the target is going): keep the processes we know
            return
        seen: dict[int, _ProcState] = {}
        for p in found:
            if p.pid == self._own_pid:  # started by the target itself (in-process training): not a training child
                continue
            old = self._children.get(p.pid)
            st = old if old is not None and old.proc == p else _ProcState(p)  # same pid+create time: keep deltas
            if not self.fast:  # the fast path reads the ppid with everything else, every tick
                try:
                    st.ppid = p.ppid()
                except self._skip:
                    continue
            seen[p.pid] = st
        self._children = seen
        for st in seen.values():
            if st.cmd_role is None and st.cmd_checked_age < 2.0:
                self._classify_cmdline(st)

    def _classify_cmdline(self, st: _ProcState) -> None:
        try:
            cmd = st.proc.cmdline()
            age = time.time() - st.proc.create_time()
        except self._skip:
            return
        st.cmd_role = role_from_cmdline(cmd)
        st.cmd_checked_age = max(age, 0.0) if st.cmd_role is None else math.inf

    def role_of(self, pid: int, parents: dict[int, int | None]) -> str:
        """roles file first, then the command line, then the nearest classified ancestor below the target, else
        "other" (a worker's own subprocesses belong to its role)."""
        seen = set()
        p: int | None = pid
        while p is not None and p != self.pid and p not in seen:
            seen.add(p)
            if p in self._roles_file:
                return self._roles_file[p]
            st = self._children.get(p)
            if st is not None and st.cmd_role:
                return st.cmd_role
            p = parents.get(p)
        return "other"

    def _read_fast(self, st: _ProcState) -> tuple | None:
        ps = self.proc.process(st.proc.pid)
        if ps is None or ps.state in ("Z", "X"):  # gone, or a zombie waiting to be reaped
            return None
        if st.starttime is None:
            st.starttime = ps.starttime
        elif ps.starttime != st.starttime:  # the pid now belongs to another process
            return None
        st.ppid = ps.ppid
        io = self.proc.io(ps.pid) or {}
        start_s = ps.starttime / self.proc.clk_tck
        fresh = (st.t is None and self._last_bt is not None and self._bt is not None
                 and self._last_bt <= start_s <= self._bt + 0.05)
        return (ps.name, ps.ticks / self.proc.clk_tck, ps.rss_pages * self.proc.page_size, ps.num_threads,
                io.get("read_bytes"), io.get("write_bytes"), io.get("rchar"), fresh)

    def _read_psutil(self, st: _ProcState, main: bool) -> tuple | None:
        p = st.proc
        try:
            with p.oneshot():
                if p.status() == self.ps.STATUS_ZOMBIE:
                    return None
                ct = p.cpu_times()
                rss = p.memory_info().rss
                name = p.name()
                nthreads = p.num_threads() if main else None
                try:
                    io = p.io_counters()
                except (self.ps.AccessDenied, AttributeError, NotImplementedError, OSError):
                    io = None
                fresh = st.t is None and self._last_wall is not None and p.create_time() >= self._last_wall
        except self._skip:
            return None
        return (name, ct.user + ct.system, rss, nthreads, getattr(io, "read_bytes", None),
                getattr(io, "write_bytes", None), getattr(io, "read_chars", None), fresh)

    def _read(self, st: _ProcState, now: float, wall: float, main: bool = False) -> dict[str, Any] | None:
        got = self._read_fast(st) if self.fast else self._read_psutil(st, main)
        if got is None:
            return None
        name, cpu_s, rss, nthreads, rb, wb, rc, fresh = got
        if fresh:  # born since the last sample: everything it used, it used within this interval
            st.cpu_s, st.read_bytes, st.write_bytes, st.read_chars, st.t = 0.0, 0, 0, 0, self._last_t
        dt = now - st.t if st.t is not None else None
        rec: dict[str, Any] = {
            "pid": st.proc.pid, "ppid": st.ppid, "name": name,
            "cpu": _rate(cpu_s - st.cpu_s, dt, 100.0) if st.cpu_s is not None else None,
            "rss": int(rss),
            "read_bps": _rate(rb - st.read_bytes, dt, ndigits=None) if None not in (rb, st.read_bytes) else None,
            "write_bps": _rate(wb - st.write_bytes, dt, ndigits=None) if None not in (wb, st.write_bytes) else None,
        }
        if main:
            rec["num_threads"] = nthreads
            rec["read_chars_ps"] = (_rate(rc - st.read_chars, dt, ndigits=None)
                                    if None not in (rc, st.read_chars) else None)
        st.cpu_s, st.read_bytes, st.write_bytes, st.read_chars, st.t = cpu_s, rb, wb, rc, now
        return rec

    def _procs(self, now: float, wall: float) -> tuple[dict | None, list[dict], dict[str, dict]]:
        if self.target is None:
            return None, [], _empty_roles()
        if self._reload_roles() or now >= self._next_rescan:
            self._rescan(now)
        main = self._read(self._main, now, wall, main=True) if self._main is not None else None
        rows: list[dict] = []
        for pid in list(self._children):
            row = self._read(self._children[pid], now, wall)
            if row is None:  # vanished, a zombie, or not ours to read
                del self._children[pid]
                continue
            rows.append(row)
        parents = {r["pid"]: r["ppid"] for r in rows}
        roles = _empty_roles()
        for r in rows:
            r["role"] = role = self.role_of(r["pid"], parents)
            agg = roles[role]
            agg["count"] += 1
            agg["rss"] += r["rss"]
            for k in ("cpu", "read_bps"):
                if r[k] is not None:
                    agg[k] = round(agg[k] + r[k], 1)
        return main, rows, roles

    def _threads(self, now: float) -> tuple[dict | None, list[dict] | None]:
        """The training thread's CPU (% of one core, from utime+stime deltas) and, on full scans, the busiest."""
        tck = float(self.proc.clk_tck)
        full = self.tid is None or now >= self._next_thread_scan

        def pct(ts: ThreadStat) -> float | None:
            prev = self._threads_prev.get(ts.tid)
            self._threads_prev[ts.tid] = (ts.ticks, now)
            if prev is None:
                return None
            return _rate((ts.ticks - prev[0]) / tck, now - prev[1], 100.0)

        def row(ts: ThreadStat, cpu: float | None, source: str) -> dict[str, Any]:
            return {"tid": ts.tid, "name": ts.name, "cpu": cpu, "core": ts.core, "source": source}

        top: list[dict] | None = None
        thread: dict | None = None
        if full:
            self._next_thread_scan = now + self.thread_scan_s
            stats = [s for s in (self.proc.thread_stat(self.pid, t) for t in self.proc.tids(self.pid)) if s]
            alive = {s.tid for s in stats}
            for tid in [t for t in self._threads_prev if t not in alive]:
                del self._threads_prev[tid]
            rows = [row(s, pct(s), "busiest") for s in stats]
            ranked = sorted((r for r in rows if r["cpu"] is not None), key=lambda r: -r["cpu"])
            top = [{k: r[k] for k in ("tid", "name", "cpu", "core")} for r in ranked[:TOP_THREADS]]
            if self.tid is not None:
                mine = next((r for r in rows if r["tid"] == self.tid), None)
                thread = dict(mine, source="tid") if mine else None
            elif ranked:
                thread = ranked[0]
            elif rows:
                thread = rows[0]
        else:
            ts = self.proc.thread_stat(self.pid, self.tid)
            if ts is not None:
                thread = row(ts, pct(ts), "tid")
        if thread is None and self.tid is not None:
            thread = {"tid": self.tid, "name": None, "cpu": None, "core": None, "source": "tid"}
        return thread, top

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
            "read_bps": _rate(io.read_bytes - prev.read_bytes, dt, ndigits=None),
            "write_bps": _rate(io.write_bytes - prev.write_bytes, dt, ndigits=None),
            "read_iops": _rate(io.read_count - prev.read_count, dt),
            "write_iops": _rate(io.write_count - prev.write_count, dt),
        }

    # GPU

    def _gpu(self, now: float, wall: float) -> dict[str, Any]:
        n, h = self.nvml, self.gpu_handle
        util = n.utilization(h)
        mem = n.memory_used(h)
        mask = n.throttle_reasons(h)
        util_samples = None  # null: not read at this tick (or unsupported); []: read, nothing new
        if now >= self._next_util_samples:
            self._next_util_samples = now + self.util_samples_s
            samples = n.utilization_samples(h, self._util_last_ts)
            if samples is not None:
                if samples:
                    self._util_last_ts = max(ts for ts, _ in samples)
                # NVML stamps samples with the CPU's wall clock in microseconds (checked on an H200, driver 580):
                # put them on the monotonic axis of the step timestamps.
                util_samples = [[round(now - (wall - ts / 1e6), 4), v] for ts, v in samples]
        rx = tx = None
        if now >= self._next_pcie:  # last: it blocks ~40 ms
            self._next_pcie = now + self.pcie_s
            rx, tx = n.pcie_throughput_kbps(h)
        return {
            "index": self.gpu_index,
            "util": util["gpu"] if util else None,
            "mem_util": util["memory"] if util else None,
            "mem_used": mem[0] if mem else None,
            "mem_total": mem[1] if mem else None,
            "sm_clock_mhz": n.clock_mhz(h, "sm"),
            "power_w": round(p, 1) if (p := n.power_w(h)) is not None else None,
            "temp_c": n.temperature_c(h),
            "pcie_rx_kbps": rx,
            "pcie_tx_kbps": tx,
            "throttle_mask": mask,
            "throttle": decode_throttle_reasons(mask, self._throttle_names or None),
            "util_samples": util_samples,
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


def _empty_roles() -> dict[str, dict[str, Any]]:
    return {r: {"count": 0, "cpu": 0.0, "rss": 0, "read_bps": 0} for r in ROLES}


def write_record(out: IO[str], rec: dict[str, Any]) -> None:
    """One JSON line, flushed at once (strict JSON: a NaN or infinity that slipped through is written as null)."""
    try:
        line = json.dumps(rec, separators=(",", ":"), allow_nan=False, default=str)
    except ValueError:
        line = json.dumps(_finite(rec), separators=(",", ":"), allow_nan=False, default=str)
    out.write(line + "\n")
    out.flush()


def _finite(v: Any) -> Any:
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite(x) for x in v]
    return v


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every complete record of a sampler file; a torn last line (the sampler was killed mid-write) is dropped."""
    return list(iter_records(path))


def iter_records(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    from yolodoctor.rundir import open_regular

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


# ---------------------------------------------------------------------------------------------------------------------
# Python API for the runner


def start_sampler(pid: int, out: str | os.PathLike[str], hz: float = 5, gpu_uuid: str | None = None,
                  roles: str | os.PathLike[str] | None = None, tid: int | None = None, *, gpu: bool = True,
                  ready_timeout: float | None = 10.0, python: str | None = None,
                  env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start the sampler as its own process (in a new session, so a Ctrl-C aimed at the training does not cut the
    record short; it stops by itself when ``pid`` exits). ``out`` is replaced. With ``ready_timeout``, wait until the
    ``sampler_start`` record is written (or the sampler died, or the time is up) before returning."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        out.unlink()
    except FileNotFoundError:
        pass
    cmd = [python or sys.executable, "-m", "yolodoctor.profiling.sampler", "--pid", str(pid), "--out", str(out),
           "--hz", str(hz)]
    if gpu_uuid:
        cmd += ["--gpu-uuid", gpu_uuid]
    if roles:
        cmd += ["--roles", os.fspath(roles)]
    if tid is not None:
        cmd += ["--tid", str(tid)]
    if not gpu:
        cmd += ["--no-gpu"]
    environ = dict(os.environ if env is None else env)
    pkg_root = str(Path(__file__).resolve().parents[2])  # importable even when yolodoctor is not installed
    paths = [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if pkg_root not in paths:
        environ["PYTHONPATH"] = os.pathsep.join([pkg_root, *paths])
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=environ,
                            start_new_session=True, close_fds=True)
    if ready_timeout:
        deadline = time.monotonic() + ready_timeout
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with open(out, "rb") as f:
                    if b"\n" in f.readline():
                        break
            except FileNotFoundError:
                pass
            time.sleep(0.02)
    return proc


def stop_sampler(proc: subprocess.Popen, timeout: float = 5.0) -> int | None:
    """SIGTERM, then wait for the sampler to finish its tick and write ``sampler_end``; SIGKILL if it hangs."""
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


# ---------------------------------------------------------------------------------------------------------------------
# command line


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m yolodoctor.profiling.sampler",
                                description="Sample CPU, threads, workers, memory, disk and GPU beside a process.")
    p.add_argument("--pid", type=int, required=True, help="the training process")
    p.add_argument("--out", required=True, help="JSONL file to write (replaced)")
    p.add_argument("--hz", type=float, default=5.0, help="samples per second (default 5)")
    p.add_argument("--gpu-uuid", default=None, help="torch's device UUID (NVML's 'GPU-' prefix optional)")
    p.add_argument("--roles", default=None, help='JSON file {"<pid>": "train_worker"|"val_worker"|...}')
    p.add_argument("--tid", type=int, default=None, help="native id of the training thread")
    p.add_argument("--no-gpu", action="store_true", help="do not query NVML (GPU telemetry off)")
    p.add_argument("--duty", default=None, metavar="ON,OFF", help="sample ON seconds, pause OFF seconds, repeat")
    return p


def parse_duty(text: str | None) -> tuple[float, float] | None:
    if not text:
        return None
    try:
        on, off = (float(x) for x in text.split(","))
    except ValueError:
        raise ValueError(f"--duty must be ON,OFF seconds, got {text!r}") from None
    if not (on > 0 and off > 0):
        raise ValueError(f"--duty must be two positive numbers of seconds, got {text!r}")
    return on, off


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not args.hz > 0:
        print("sampler: --hz must be positive", file=sys.stderr)
        return 2
    try:
        duty = parse_duty(args.duty)
    except ValueError as e:
        print(f"sampler: {e}", file=sys.stderr)
        return 2
    stopping: list[str] = []
    r_fd, w_fd = os.pipe()
    os.set_blocking(w_fd, False)
    signal.set_wakeup_fd(w_fd)

    def on_signal(signum: int, _frame: Any) -> None:
        stopping.append("interrupted" if signum == signal.SIGINT else "stopped")

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_signal)

    def wait(seconds: float) -> None:  # returns at once when a signal arrives
        ready, _, _ = select.select([r_fd], [], [], seconds)
        if ready:
            os.read(r_fd, 512)

    out_path = Path(args.out)
    try:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        with open(out_path, "w", encoding="utf-8") as out:
            sampler = Sampler(args.pid, tid=args.tid, roles_path=args.roles, gpu_uuid=args.gpu_uuid,
                              nvml=Nvml(None, "GPU telemetry turned off (--no-gpu)") if args.no_gpu else None)
            try:
                sampler.run(out, args.hz, stop=lambda: stopping[0] if stopping else None, wait=wait, duty=duty)
            finally:
                sampler.nvml.close()
    except OSError as e:  # cannot write the file (disk full, directory gone): nothing more to do
        print(f"sampler: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
