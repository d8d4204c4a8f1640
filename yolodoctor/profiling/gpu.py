"""The sampler's GPU section, through NVML (api/nvml): the GPU the training uses, picked once by UUID or as the
first visible one, and its utilisation, memory, clocks, power, temperature, PCIe traffic and throttle reasons at
each sample; a value NVML does not give is null."""

from __future__ import annotations

import math
from typing import Any

from yolodoctor.api.nvml import Nvml, decode_throttle_reasons, throttle_reason_names, visible_gpus

# Measured on an H200 (driver 580): nvmlDeviceGetSamples costs ~2.9 ms of CPU a call, the PCIe pair ~2 ms of CPU and
# 42 ms of wall time (each counter is measured over 20 ms); every other query ~0.1-0.2 ms. The driver keeps many
# seconds of utilisation samples and returns all since the last timestamp, so reading them once a second loses none.
UTIL_SAMPLES_S = 1.0
PCIE_S = 1.0


RANK_GPUS_S = 5.0  # how often the GPUs' compute processes are listed to find each DDP rank's GPU


class RankGpus:
    """Each DDP rank's own GPU, found by NVML's list of the processes running on each GPU (a rank's pid on it), and
    that GPU's utilisation and memory at each sample. Nothing where NVML is missing or lists no rank (a container
    whose process namespace NVML does not see)."""

    def __init__(self, nvml: Nvml, rescan_s: float = RANK_GPUS_S) -> None:
        self.nvml = nvml
        self.rescan_s = rescan_s
        self._next = -math.inf
        self._by_pid: dict[int, tuple[int, Any, str]] = {}  # pid -> (NVML index, handle, UUID)

    def _scan(self) -> None:
        by_pid: dict[int, tuple[int, Any, str]] = {}
        for index, handle in self.nvml.handles():
            pids = self.nvml.compute_pids(handle)
            if not pids:
                continue
            uuid = self.nvml.uuid(handle) or ""
            for pid in pids:
                by_pid[pid] = (index, handle, uuid)
        self._by_pid = by_pid

    def annotate(self, ranks: dict[str, dict[str, Any]], now: float) -> None:
        """Adds ``gpu`` (index, uuid, util, mem_used) to each rank of a sample's ``ranks`` whose process runs on a
        GPU."""
        if not self.nvml.available or not ranks:
            return
        if now >= self._next:
            self._next = now + self.rescan_s
            self._scan()
        for row in ranks.values():
            pid = row.get("pid")
            hit = self._by_pid.get(pid) if isinstance(pid, int) else None
            if hit is None:
                continue
            index, handle, uuid = hit
            util = self.nvml.utilization(handle)
            mem = self.nvml.memory_used(handle)
            row["gpu"] = {"index": index, "uuid": uuid, "util": util["gpu"] if util else None,
                          "mem_used": mem[0] if mem else None}


class GpuSection:
    """``uuid``: torch's device UUID; without it, the first GPU CUDA_VISIBLE_DEVICES (``environ``) shows. Where none
    is found, ``handle`` is None and ``unavailable`` says why; ``match`` says how it was found ("uuid",
    "first_visible")."""

    def __init__(self, nvml: Nvml, uuid: str | None = None, environ: dict[str, str] | None = None, *,
                 util_samples_s: float = UTIL_SAMPLES_S, pcie_s: float = PCIE_S) -> None:
        self.nvml = nvml
        self.uuid = uuid
        self.util_samples_s = util_samples_s
        self.pcie_s = pcie_s
        self._next_util_samples = -math.inf
        self._next_pcie = -math.inf
        self.handle: Any = None
        self.index: int | None = None
        self.unavailable: str | None = None
        self.match: str | None = None
        self._throttle_names = throttle_reason_names(getattr(nvml, "_lib", None)) if nvml.available else {}
        self._util_last_ts = 0
        self._select(environ)

    def _select(self, environ: dict[str, str] | None) -> None:
        if not self.nvml.available:
            self.unavailable = self.nvml.unavailable_reason or "NVML unavailable"
            return
        if self.uuid:
            hit = self.nvml.handle_by_uuid(self.uuid)
            if hit is None:
                self.unavailable = f"no NVML GPU has UUID {self.uuid}"
                return
            self.index, self.handle = hit
            self.match = "uuid"
            return
        gpus = self.nvml.gpus()
        vis = visible_gpus(gpus, environ)
        if not vis:
            self.unavailable = "no GPU visible" if not gpus else "no GPU visible under CUDA_VISIBLE_DEVICES"
            return
        hit = self.nvml.handle_by_uuid(vis[0].uuid) if vis[0].uuid else None
        if hit is None:
            h = self.nvml.call("nvmlDeviceGetHandleByIndex", vis[0].index)
            hit = (vis[0].index, h) if h is not None else None
        if hit is None:
            self.unavailable = "NVML lists a GPU but gives no handle for it"
            return
        self.index, self.handle = hit
        self.match = "first_visible"

    def start(self) -> dict[str, Any]:
        """The ``sampler_start`` record's GPU fields: ``gpu`` (its description and match) and ``gpu_driver``, or
        ``gpu_unavailable``; drains the driver's backlog of utilisation samples."""
        if self.handle is None:
            return {"gpu_unavailable": self.unavailable}
        info = self.nvml.info(self.index or 0, self.handle).to_dict()
        info["match"] = self.match
        info["nvlink_links"] = self.nvml.nvlink_links(self.handle)  # the link DDP's all-reduce crosses: NVLink or PCIe
        out = {"gpu": info, "gpu_driver": self.nvml.driver_version()}
        first = self.nvml.utilization_samples(self.handle, 0)  # drain the driver's backlog
        if first:
            self._util_last_ts = max(ts for ts, _ in first)
        out["gpu_unavailable"] = None
        return out

    def read(self, now: float, wall: float) -> dict[str, Any]:
        """The ``gpu`` section of a sample at monotonic time ``now`` (wall time ``wall``); utilisation samples
        (``util_samples``, on the monotonic axis) and PCIe traffic only at their own intervals, null between."""
        n, h = self.nvml, self.handle
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
            "index": self.index,
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
