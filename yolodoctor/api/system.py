"""CPU, memory and file-system facts from /proc, /sys and psutil; every query degrades to None."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import psutil

NETWORK_FS = {"nfs", "nfs4", "cifs", "smb", "smb3", "smbfs", "sshfs", "9p", "ceph", "glusterfs", "lustre", "gpfs",
              "beegfs", "afs", "davfs", "s3fs", "gcsfuse", "virtiofs"}


def affinity_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cgroup_cpu_quota(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """CPUs allowed by the cgroup CPU quota (v2 cpu.max or v1 cfs quota), or None when unlimited/unknown."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        q = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        p = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return None if q <= 0 or p <= 0 else q / p
    except (OSError, ValueError):
        return None


def usable_cpus(quota: float | None = None, affinity: int | None = None) -> float:
    aff = affinity if affinity is not None else affinity_cpus()
    q = quota if quota is not None else cgroup_cpu_quota()
    return min(float(aff), q) if q else float(aff)


def memory() -> dict[str, int | None]:
    vm = psutil.virtual_memory()
    return {"total": int(vm.total), "available": int(vm.available)}


def disk_free(path: str | Path) -> int | None:
    try:
        return int(shutil.disk_usage(path).free)
    except OSError:
        return None


def mount_of(path: str | Path, partitions: list[Any] | None = None) -> dict[str, str] | None:
    """The mount (device, mountpoint, fstype) holding ``path``: the longest mountpoint that prefixes it."""
    try:
        real = os.path.realpath(path)
        parts = partitions if partitions is not None else psutil.disk_partitions(all=True)
    except OSError:
        return None
    best = None
    for p in parts:
        mp = p.mountpoint.rstrip("/") or "/"
        covers = real == mp or real.startswith(mp + "/") or mp == "/"
        if covers and (best is None or len(mp) > len(best.mountpoint.rstrip("/") or "/")):
            best = p
    if best is None:
        return None
    return {"device": best.device, "mountpoint": best.mountpoint, "fstype": best.fstype}


def is_network_fs(fstype: str | None) -> bool:
    if not fstype:
        return False
    t = fstype.lower()
    return t in NETWORK_FS or t.startswith("fuse") or t.startswith("nfs")
