"""The training process and its descendants, as the sampler sees them: per-process CPU, RSS and IO rates with each
process's role, and the CPU of the training thread and of the busiest threads."""

from __future__ import annotations

import contextlib
import math
import os
from typing import Any

from yolodoctor.profiling.procfs import ProcReader, ProcState, ThreadStat, gone_errors, rate, read_procfs, read_psutil
from yolodoctor.profiling.roles import RolesFile, by_rank, classify_cmdline, empty_roles, read_rank, role_of, tally

RESCAN_S = 1.0  # how often the process tree is listed again (psutil's children() reads every /proc/PID/stat)
THREAD_SCAN_S = 1.0  # how often every thread of the target is read for ``threads_top`` when a tid is given
TOP_THREADS = 5


class ProcessTree:
    """The target ``pid`` (the training process) and its descendants. ``ps`` is psutil (or a fake): it lists the tree
    and reads command lines; ``proc`` reads per-thread CPU and, where it can read the target (``fast``), per-process
    counters too, else psutil does."""

    def __init__(self, pid: int, *, tid: int | None, roles_path: str | os.PathLike[str] | None, ps: Any,
                 proc: ProcReader, rescan_s: float = RESCAN_S, thread_scan_s: float = THREAD_SCAN_S) -> None:
        self.ps = ps
        self.proc = proc
        self.pid = pid
        self.tid = tid
        self.roles = RolesFile(roles_path)
        self.rescan_s = rescan_s
        self.thread_scan_s = thread_scan_s
        self._skip = gone_errors(ps)
        try:
            self.target: Any = ps.Process(pid)
        except self._skip:
            self.target = None
        self._main = ProcState(self.target) if self.target is not None else None
        first = proc.process(pid) if self.target is not None else None
        self.fast = first is not None  # /proc readable for the target: the cheap per-process path
        if self._main is not None:
            with contextlib.suppress(*self._skip):
                self._main.ppid = self.target.ppid()
            if first is not None:
                self._main.starttime = first.starttime
        self._t: float | None = None  # this sample's monotonic time, wall time and boot time (s), and the last's
        self._wall: float | None = None
        self._bt: float | None = None
        self._last_t: float | None = None
        self._last_wall: float | None = None
        self._last_bt: float | None = None
        self._children: dict[int, ProcState] = {}
        self._own_pid = os.getpid()
        self._next_rescan = -math.inf
        self._threads_prev: dict[int, tuple[int, float]] = {}
        self._next_thread_scan = -math.inf

    def alive(self) -> bool:
        """False once the target has exited (a zombie waiting for its parent counts as exited) or its pid is reused."""
        if self.target is None:
            return False
        if self.fast:
            ps = self.proc.process(self.pid)
            main = self._main  # set with the target
            return ps is not None and main is not None and ps.state not in ("Z", "X") and ps.starttime == main.starttime
        try:
            return bool(self.target.is_running()) and self.target.status() != self.ps.STATUS_ZOMBIE
        except self._skip:
            return False

    def cmdline(self) -> list[str] | None:
        if self.target is None:
            return None
        try:
            return self.target.cmdline()
        except self._skip:
            return None

    def sample(self, now: float, wall: float) -> tuple[dict | None, list[dict], dict[str, dict]]:
        """The target's row, its descendants' rows (each with its ``role``, and its DDP ``rank`` where its environment
        names one) and the per-role totals, at monotonic time ``now`` (wall time ``wall``); called once per sample.
        Rates cover the interval since the previous call."""
        self._last_t, self._last_wall, self._last_bt = self._t, self._wall, self._bt
        self._t, self._wall, self._bt = now, wall, self.proc.boottime() if self.fast else None
        if self.target is None:
            return None, [], empty_roles()
        if self.roles.reload() or now >= self._next_rescan:
            self._rescan(now)
        main = self._read(self._main, now, main=True) if self._main is not None else None
        rows: list[dict] = []
        for pid in list(self._children):
            row = self._read(self._children[pid], now)
            if row is None:  # vanished, a zombie, or not ours to read
                del self._children[pid]
                continue
            rows.append(row)
        parents = {r["pid"]: r["ppid"] for r in rows}
        by_cmdline = {pid: st.cmd_role for pid, st in self._children.items()}
        for r in rows:
            r["role"] = role_of(r["pid"], parents, self.roles.by_pid, by_cmdline, self.pid)
            rank = self._children[r["pid"]].rank
            if rank is not None:
                r["rank"] = rank
        return main, rows, tally(rows)

    @staticmethod
    def ranks(rows: list[dict]) -> dict[str, dict]:
        """Per DDP rank: its process, its loader workers (roles.by_rank); empty for a single process."""
        return by_rank(rows)

    def _rescan(self, now: float) -> None:
        self._next_rescan = now + self.rescan_s
        try:
            found = self.target.children(recursive=True)
        except self._skip:  # the listing itself failed (the target is going): keep the processes we know
            return
        seen: dict[int, ProcState] = {}
        for p in found:
            if p.pid == self._own_pid:  # started by the target itself (in-process training): not a training child
                continue
            old = self._children.get(p.pid)
            st = old if old is not None and old.proc == p else ProcState(p)  # same pid+create time: keep deltas
            if not self.fast:  # the fast path reads the ppid with everything else, every tick
                try:
                    st.ppid = p.ppid()
                except self._skip:
                    continue
            seen[p.pid] = st
        self._children = seen
        for st in seen.values():
            if st.cmd_role is None and st.cmd_checked_age < 2.0:
                classify_cmdline(st, self._skip)
            if not st.rank_read:
                read_rank(st, self._skip)

    def _read(self, st: ProcState, now: float, main: bool = False) -> dict[str, Any] | None:
        got = (read_procfs(self.proc, st, self._bt, self._last_bt) if self.fast else
               read_psutil(self.ps, st, main, self._last_wall))
        if got is None:
            return None
        name, cpu_s, rss, nthreads, rb, wb, rc, fresh = got
        if fresh:  # born since the last sample: everything it used, it used within this interval
            st.cpu_s, st.read_bytes, st.write_bytes, st.read_chars, st.t = 0.0, 0, 0, 0, self._last_t
        dt = now - st.t if st.t is not None else None
        rec: dict[str, Any] = {
            "pid": st.proc.pid, "ppid": st.ppid, "name": name,
            "cpu": rate(cpu_s - st.cpu_s, dt, 100.0) if st.cpu_s is not None else None,
            "rss": int(rss),
            "read_bps": (rate(rb - st.read_bytes, dt, ndigits=None)
                         if rb is not None and st.read_bytes is not None else None),
            "write_bps": (rate(wb - st.write_bytes, dt, ndigits=None)
                          if wb is not None and st.write_bytes is not None else None),
        }
        if main:
            rec["num_threads"] = nthreads
            rec["read_chars_ps"] = (rate(rc - st.read_chars, dt, ndigits=None)
                                    if rc is not None and st.read_chars is not None else None)
        st.cpu_s, st.read_bytes, st.write_bytes, st.read_chars, st.t = cpu_s, rb, wb, rc, now
        return rec

    def threads(self, now: float) -> tuple[dict | None, list[dict] | None]:
        """The training thread's CPU (% of one core, from utime+stime deltas; ``tid``, else the busiest) and, on full
        scans (every ``thread_scan_s`` with a ``tid``, else every call), the busiest threads."""
        tck = float(self.proc.clk_tck)
        tid = self.tid
        full = tid is None or now >= self._next_thread_scan

        def pct(ts: ThreadStat) -> float | None:
            prev = self._threads_prev.get(ts.tid)
            self._threads_prev[ts.tid] = (ts.ticks, now)
            if prev is None:
                return None
            return rate((ts.ticks - prev[0]) / tck, now - prev[1], 100.0)

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
        elif tid is not None:  # (not a full scan: there is a tid)
            ts = self.proc.thread_stat(self.pid, tid)
            if ts is not None:
                thread = row(ts, pct(ts), "tid")
        if thread is None and self.tid is not None:
            thread = {"tid": self.tid, "name": None, "cpu": None, "core": None, "source": "tid"}
        return thread, top
