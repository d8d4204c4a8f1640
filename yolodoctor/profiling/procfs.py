"""Reading processes on Linux: /proc's stat and io files parsed directly (a third of psutil's cost per process), and
psutil where /proc cannot be read; the sampler's per-process readings and rates."""

from __future__ import annotations

import contextlib
import math
import os
import time
from dataclasses import dataclass
from typing import Any, NamedTuple


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
                with contextlib.suppress(ValueError):
                    out[k.decode()] = int(v)
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


@dataclass
class ProcState:
    """What the sampler keeps of one process between samples: its last counters and its role by command line."""
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
    rank: int | None = None  # the DDP rank in its environment (RANK, set by torch.distributed.run), read once
    rank_read: bool = False


class Reading(NamedTuple):
    """One process's counters at one sample."""
    name: str
    cpu_s: float  # user + system CPU seconds
    rss: int
    num_threads: int | None
    read_bytes: int | None
    write_bytes: int | None
    read_chars: int | None
    fresh: bool  # born since the previous sample


def gone_errors(psutil_mod: Any) -> tuple[type[BaseException], ...]:
    """psutil's errors for a process that is gone, a zombie, or not ours to read."""
    return psutil_mod.NoSuchProcess, psutil_mod.AccessDenied, psutil_mod.ZombieProcess


def read_procfs(reader: ProcReader, st: ProcState, bt: float | None, last_bt: float | None) -> Reading | None:
    """One process's counters read off /proc; None where it is gone, a zombie, or its pid now belongs to another
    process. ``bt``, ``last_bt``: the boot clock at this sample and at the previous one (``fresh``)."""
    ps = reader.process(st.proc.pid)
    if ps is None or ps.state in ("Z", "X"):  # gone, or a zombie waiting to be reaped
        return None
    if st.starttime is None:
        st.starttime = ps.starttime
    elif ps.starttime != st.starttime:  # the pid now belongs to another process
        return None
    st.ppid = ps.ppid
    io = reader.io(ps.pid) or {}
    start_s = ps.starttime / reader.clk_tck
    fresh = st.t is None and last_bt is not None and bt is not None and last_bt <= start_s <= bt + 0.05
    return Reading(ps.name, ps.ticks / reader.clk_tck, ps.rss_pages * reader.page_size, ps.num_threads,
                   io.get("read_bytes"), io.get("write_bytes"), io.get("rchar"), fresh)


def read_psutil(psutil_mod: Any, st: ProcState, main: bool, last_wall: float | None) -> Reading | None:
    """The same through psutil (``num_threads`` for the ``main`` process only); ``last_wall``: the wall clock at the
    previous sample (``fresh``)."""
    p = st.proc
    try:
        with p.oneshot():
            if p.status() == psutil_mod.STATUS_ZOMBIE:
                return None
            ct = p.cpu_times()
            rss = p.memory_info().rss
            name = p.name()
            nthreads = p.num_threads() if main else None
            try:
                io = p.io_counters()
            except (psutil_mod.AccessDenied, AttributeError, NotImplementedError, OSError):
                io = None
            fresh = st.t is None and last_wall is not None and p.create_time() >= last_wall
    except gone_errors(psutil_mod):
        return None
    return Reading(name, ct.user + ct.system, rss, nthreads, getattr(io, "read_bytes", None),
                   getattr(io, "write_bytes", None), getattr(io, "read_chars", None), fresh)


def rate(delta: float | None, dt: float | None, scale: float = 1.0, ndigits: int | None = 1) -> float | None:
    """``delta`` per second over ``dt``, times ``scale``, rounded (``ndigits`` None: an int); None where unknown."""
    if delta is None or not dt or dt <= 0:
        return None
    v = delta / dt * scale
    if not math.isfinite(v):
        return None
    v = max(v, 0.0)  # counters never run backwards; a reset (pid reuse, wrap) must not read as negative
    return round(v, ndigits) if ndigits is not None else int(v)

