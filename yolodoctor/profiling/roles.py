"""The role of each process under the training: "train_worker", "val_worker" (from the roles file the training
process writes), "compile_worker" (from its command line), else its nearest classified ancestor's, else "other";
and the per-role totals of a sample."""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Mapping
from typing import Any

from yolodoctor.profiling.procfs import ProcState

ROLES = ("train_worker", "val_worker", "compile_worker", "other")
# torch/_inductor/compile_worker/subproc_pool.py (torch 2.x) starts its sidecar as
#   [sys.executable, ".../torch/_inductor/compile_worker/__main__.py", "--pickler=...", "--kind=fork", ...]
# and the sidecar forks its ProcessPoolExecutor workers, which keep that command line. "-m" launches and older
# torch spell the module name, which also contains the marker.
COMPILE_WORKER_MARKERS = ("torch._inductor.compile_worker", "compile_worker")


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


def rank_roles_name(rank: int) -> str:
    """The roles file of DDP rank ``rank`` beside the main one (``roles.json``, written by rank 0 or the only
    process): each rank names its own loader workers."""
    return f"roles-rank{rank}.json"


class RolesFile:
    """The roles file (``{"<pid>": role}``) and the per-rank ones beside it (:func:`rank_roles_name`), read again
    whenever one changes; ``by_pid`` holds the last complete reading of all of them."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = os.fspath(path) if path else None
        self.by_pid: dict[int, str] = {}
        self._key: tuple | None = None

    def _files(self) -> list[str]:
        if not self.path:
            return []
        folder = os.path.dirname(self.path) or "."
        try:
            ranks = sorted(n for n in os.listdir(folder) if n.startswith("roles-rank") and n.endswith(".json"))
        except OSError:
            ranks = []
        return [self.path, *(os.path.join(folder, n) for n in ranks)]

    def reload(self) -> bool:
        """Whether any of the files changed since the last read (and all were read whole)."""
        stats = []
        for f in self._files():
            try:
                st = os.stat(f)
            except OSError:
                continue
            stats.append((f, st.st_mtime_ns, st.st_size, st.st_ino))
        if not stats:
            return False
        key = tuple(stats)
        if key == self._key:
            return False
        merged: dict[int, str] = {}
        for f, *_ in stats:
            roles = load_roles(f)
            if roles is None:  # half-written by a writer that does not rename: try again next tick
                return False
            merged.update(roles)
        self._key = key
        self.by_pid = merged
        return True


def classify_cmdline(st: ProcState, gone: tuple[type[BaseException], ...]) -> None:
    """Sets ``st.cmd_role`` from its command line; a process still young when read is read again at a later rescan
    (``cmd_checked_age``). ``gone``: the errors of a process that vanished."""
    try:
        cmd = st.proc.cmdline()
        age = time.time() - st.proc.create_time()
    except gone:
        return
    st.cmd_role = role_from_cmdline(cmd)
    st.cmd_checked_age = max(age, 0.0) if st.cmd_role is None else math.inf


def role_of(pid: int, parents: Mapping[int, int | None], by_file: Mapping[int, str],
            by_cmdline: Mapping[int, str | None], target: int) -> str:
    """The roles file first, then the command line, then the nearest classified ancestor below ``target``, else
    "other" (a worker's own subprocesses belong to its role)."""
    seen = set()
    p: int | None = pid
    while p is not None and p != target and p not in seen:
        seen.add(p)
        if p in by_file:
            return by_file[p]
        cmd_role = by_cmdline.get(p)
        if cmd_role:
            return cmd_role
        p = parents.get(p)
    return "other"


def read_rank(st: ProcState, gone: tuple[type[BaseException], ...]) -> None:
    """Sets ``st.rank`` from the process's environment (``RANK``, which torch.distributed.run gives each rank and
    every process a rank starts inherits); read once. A process whose environment cannot be read has none."""
    st.rank_read = True
    errors: tuple[type[BaseException], ...] = (*gone, AttributeError, OSError)
    try:
        value = st.proc.environ().get("RANK")
    except errors:
        return
    try:
        st.rank = int(value) if value is not None else None
    except ValueError:
        st.rank = None


def by_rank(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per DDP rank (rows that carry ``rank``): the rank's own process (``pid``, its ``cpu``, the first of the rank
    whose parent is not of the rank), its train loader workers (``workers``, ``workers_cpu``) and the RSS of all its
    processes. Empty when no row has a rank."""
    out: dict[str, dict[str, Any]] = {}
    rank_of = {r["pid"]: r.get("rank") for r in rows}
    for r in sorted(rows, key=lambda r: r["pid"]):
        rank = r.get("rank")
        if rank is None:
            continue
        agg = out.setdefault(str(rank), {"pid": None, "cpu": None, "workers": 0, "workers_cpu": 0.0, "rss": 0})
        agg["rss"] += r["rss"]
        if rank_of.get(r["ppid"]) != rank and agg["pid"] is None:
            agg["pid"], agg["cpu"] = r["pid"], r["cpu"]
        elif r.get("role") == "train_worker":
            agg["workers"] += 1
            agg["workers_cpu"] = round(agg["workers_cpu"] + (r["cpu"] or 0.0), 1)
    return out


def empty_roles() -> dict[str, dict[str, Any]]:
    return {r: {"count": 0, "cpu": 0.0, "rss": 0, "read_bps": 0} for r in ROLES}


def tally(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per-role totals (count, CPU, RSS, read rate) of process rows that carry their ``role``."""
    out = empty_roles()
    for r in rows:
        agg = out[r["role"]]
        agg["count"] += 1
        agg["rss"] += r["rss"]
        for k in ("cpu", "read_bps"):
            if r[k] is not None:
                agg[k] = round(agg[k] + r[k], 1)
    return out
