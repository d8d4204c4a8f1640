"""NVML through nvidia-ml-py (pynvml), nvitop style: every query returns a value or None, never raises.

A missing library, a machine without a GPU or a driver error are facts (``Nvml.unavailable_reason``), not errors.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class GpuInfo:
    index: int  # NVML index (physical, ignores CUDA_VISIBLE_DEVICES)
    uuid: str
    name: str
    memory_total: int | None
    compute_capability: tuple[int, int] | None
    pcie_gen: int | None
    pcie_width: int | None
    power_limit_w: float | None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["compute_capability"] = list(self.compute_capability) if self.compute_capability else None
        return d


class Nvml:
    """One NVML session. ``Nvml.open()`` never raises; check ``available``."""

    _lock = threading.Lock()

    def __init__(self, lib: Any | None, reason: str | None) -> None:
        self._lib = lib
        self.unavailable_reason = reason

    @classmethod
    def open(cls, lib: Any | None = None) -> Nvml:
        try:
            if lib is None:
                import pynvml  # nvidia-ml-py

                lib = pynvml
            with cls._lock:
                lib.nvmlInit()
            return cls(lib, None)
        except ImportError:
            return cls(None, "nvidia-ml-py is not installed")
        except Exception as e:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            return cls(None, f"NVML unavailable: {_describe(e)}")

    @property
    def available(self) -> bool:
        return self._lib is not None

    def call(self, fn: str, *args: Any) -> Any | None:
        if self._lib is None:
            return None
        try:
            return getattr(self._lib, fn)(*args)
        except Exception:
            return None

    def driver_version(self) -> str | None:
        return _text(self.call("nvmlSystemGetDriverVersion"))

    def cuda_driver_version(self) -> str | None:
        v = self.call("nvmlSystemGetCudaDriverVersion_v2") or self.call("nvmlSystemGetCudaDriverVersion")
        return f"{v // 1000}.{(v % 1000) // 10}" if isinstance(v, int) else None

    def handles(self) -> list[tuple[int, Any]]:
        n = self.call("nvmlDeviceGetCount") or 0
        out = []
        for i in range(n):
            h = self.call("nvmlDeviceGetHandleByIndex", i)
            if h is not None:
                out.append((i, h))
        return out

    def info(self, index: int, handle: Any) -> GpuInfo:
        mem = self.call("nvmlDeviceGetMemoryInfo", handle)
        cc = self.call("nvmlDeviceGetCudaComputeCapability", handle)
        power = self.call("nvmlDeviceGetEnforcedPowerLimit", handle)
        return GpuInfo(
            index=index,
            uuid=_text(self.call("nvmlDeviceGetUUID", handle)) or "",
            name=_text(self.call("nvmlDeviceGetName", handle)) or "unknown GPU",
            memory_total=getattr(mem, "total", None),
            compute_capability=tuple(cc) if cc else None,
            pcie_gen=self.call("nvmlDeviceGetCurrPcieLinkGeneration", handle),
            pcie_width=self.call("nvmlDeviceGetCurrPcieLinkWidth", handle),
            power_limit_w=power / 1000.0 if isinstance(power, (int, float)) else None,
        )

    def gpus(self) -> list[GpuInfo]:
        return [self.info(i, h) for i, h in self.handles()]

    # -- sampling (the profiler's sampler polls these a few times a second; each returns None on error) --------

    def uuid(self, handle: Any) -> str | None:
        return _text(self.call("nvmlDeviceGetUUID", handle))

    def handle_by_uuid(self, uuid: str) -> tuple[int, Any] | None:
        """The (NVML index, handle) whose UUID matches ``uuid`` (normalised: case and a 'GPU-' prefix ignored)."""
        want = normalise_uuid(uuid)
        if not want:
            return None
        for i, h in self.handles():
            if normalise_uuid(self.uuid(h)) == want:
                return i, h
        return None

    def _const(self, name: str) -> Any:
        return getattr(self._lib, name, _PYNVML_CONSTANTS.get(name))

    def nvlink_links(self, handle: Any, most: int = 18) -> int:
        """Active NVLink links of this GPU (up to ``most``, NVML's NVML_NVLINK_MAX_LINKS on Hopper); 0 where NVML
        reports none, as for a GPU that reaches the others over PCIe only."""
        active = 0
        for link in range(most):
            state = self.call("nvmlDeviceGetNvLinkState", handle, link)
            if state is None:  # not supported, or no such link: the links are numbered from 0
                break
            active += int(bool(state))
        return active

    def compute_pids(self, handle: Any) -> set[int] | None:
        """The processes running CUDA work on this GPU (NVML's pids: those of this machine's process namespace only
        where the container shares it), or None when NVML cannot say."""
        procs = self.call("nvmlDeviceGetComputeRunningProcesses", handle)
        if procs is None:
            return None
        return {int(p.pid) for p in procs if isinstance(getattr(p, "pid", None), int)}

    def utilization(self, handle: Any) -> dict[str, int | None] | None:
        """Device-wide utilisation %, averaged by the driver over its last sample period (up to a second)."""
        u = self.call("nvmlDeviceGetUtilizationRates", handle)
        if u is None:
            return None
        return {"gpu": getattr(u, "gpu", None), "memory": getattr(u, "memory", None)}

    def memory_used(self, handle: Any) -> tuple[int | None, int | None] | None:
        """(used, total) bytes of device memory, or None."""
        m = self.call("nvmlDeviceGetMemoryInfo", handle)
        if m is None:
            return None
        return getattr(m, "used", None), getattr(m, "total", None)

    def clock_mhz(self, handle: Any, which: str = "sm") -> int | None:
        const = {"graphics": "NVML_CLOCK_GRAPHICS", "sm": "NVML_CLOCK_SM", "mem": "NVML_CLOCK_MEM"}[which]
        return self.call("nvmlDeviceGetClockInfo", handle, self._const(const))

    def power_w(self, handle: Any) -> float | None:
        mw = self.call("nvmlDeviceGetPowerUsage", handle)
        return mw / 1000.0 if isinstance(mw, (int, float)) else None

    def temperature_c(self, handle: Any) -> int | None:
        return self.call("nvmlDeviceGetTemperature", handle, self._const("NVML_TEMPERATURE_GPU"))

    def pcie_throughput_kbps(self, handle: Any) -> tuple[int | None, int | None]:
        """(rx, tx) PCIe throughput in KB/s, each measured by the driver over a 20 ms window; None where unknown."""
        rx = self.call("nvmlDeviceGetPcieThroughput", handle, self._const("NVML_PCIE_UTIL_RX_BYTES"))
        tx = self.call("nvmlDeviceGetPcieThroughput", handle, self._const("NVML_PCIE_UTIL_TX_BYTES"))
        return rx, tx

    def throttle_reasons(self, handle: Any) -> int | None:
        """The clock event (throttle) reasons bit mask; decode it with ``decode_throttle_reasons``."""
        mask = self.call("nvmlDeviceGetCurrentClocksEventReasons", handle)
        if mask is None:
            mask = self.call("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
        return mask

    def utilization_samples(self, handle: Any, last_ts: int = 0) -> list[tuple[int, float]] | None:
        """Fine-grained GPU utilisation samples newer than ``last_ts``: [(timestamp_us, percent), ...].

        ``nvmlDeviceGetSamples(handle, NVML_GPU_UTILIZATION_SAMPLES, last_ts)``; NVML's timestamps are CPU
        wall-clock microseconds. "No samples since last_ts" (NVML_ERROR_NOT_FOUND) is an empty list; any other
        failure (unsupported, no NVML) is None.
        """
        if self._lib is None:
            return None
        try:
            vtype, samples = self._lib.nvmlDeviceGetSamples(
                handle, self._const("NVML_GPU_UTILIZATION_SAMPLES"), int(last_ts))
        except Exception as e:
            if getattr(e, "value", None) == self._const("NVML_ERROR_NOT_FOUND"):
                return []
            return None
        out: list[tuple[int, float]] = []
        for s in samples or ():
            ts = getattr(s, "timeStamp", None)
            v = _sample_value(getattr(s, "sampleValue", None), vtype)
            if isinstance(ts, int) and v is not None and ts > last_ts:
                out.append((ts, v))
        return out

    def close(self) -> None:
        if self._lib is not None:
            with contextlib.suppress(Exception):
                self._lib.nvmlShutdown()


def visible_gpus(gpus: list[GpuInfo], environ: dict[str, str] | None = None) -> list[GpuInfo]:
    """The NVML GPUs that CUDA_VISIBLE_DEVICES lets torch see, in torch's order (indices or UUIDs accepted)."""
    env = os.environ if environ is None else environ
    spec = env.get("CUDA_VISIBLE_DEVICES")
    if spec is None:
        return list(gpus)
    out: list[GpuInfo] = []
    for tok in (t.strip() for t in spec.split(",")):
        if not tok:
            break
        match = _match_token(tok, gpus)
        if match is None:  # CUDA stops at the first invalid entry
            break
        out.append(match)
    return out


def _match_token(tok: str, gpus: list[GpuInfo]) -> GpuInfo | None:
    if tok.lstrip("-").isdigit():
        i = int(tok)
        return next((g for g in gpus if g.index == i), None)
    want = tok.upper().removeprefix("GPU-")
    hits = [g for g in gpus if g.uuid.upper().removeprefix("GPU-").startswith(want)]
    return hits[0] if len(hits) == 1 else None


def visible_now() -> list[GpuInfo]:
    """The GPUs a CUDA program started from this environment would see, via NVML; [] without NVML."""
    nvml = Nvml.open()
    try:
        return visible_gpus(nvml.gpus()) if nvml.available else []
    finally:
        nvml.close()


def normalise_uuid(uuid: str | None) -> str:
    return (uuid or "").upper().removeprefix("GPU-")


def _text(v: Any) -> str | None:
    if v is None:
        return None
    return v.decode() if isinstance(v, bytes) else str(v)


def _describe(e: BaseException) -> str:
    return str(e).strip() or type(e).__name__


def safe(fn: Callable[[], T], default: T | None = None) -> T | None:
    try:
        return fn()
    except Exception:
        return default


# pynvml's values, used when the library object lacks a constant (e.g. a test double).
_PYNVML_CONSTANTS: dict[str, int] = {
    "NVML_CLOCK_GRAPHICS": 0, "NVML_CLOCK_SM": 1, "NVML_CLOCK_MEM": 2,
    "NVML_TEMPERATURE_GPU": 0,
    "NVML_PCIE_UTIL_TX_BYTES": 0, "NVML_PCIE_UTIL_RX_BYTES": 1,
    "NVML_GPU_UTILIZATION_SAMPLES": 1,
    "NVML_ERROR_NOT_FOUND": 6,
}

# nvmlClocksEventReason* (nvmlClocksThrottleReason* in older bindings): bit -> name. GpuIdle is not a slowdown.
THROTTLE_REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
    0x200: "board_limit",
    0x400: "reliability",
}


def _snake(camel: str) -> str:
    out = []
    for i, ch in enumerate(camel):
        if ch.isupper() and i and not camel[i - 1].isupper():
            out.append("_")
        out.append(ch.lower())
    return "".join(out)


def throttle_reason_names(lib: Any | None = None) -> dict[int, str]:
    """The bit -> name table, extended with any single-bit reason constants a newer pynvml defines."""
    table = dict(THROTTLE_REASONS)
    if lib is None:
        try:
            import pynvml
        except ImportError:
            return table
        lib = pynvml
    for prefix in ("nvmlClocksThrottleReason", "nvmlClocksEventReason"):
        for attr in dir(lib):
            if not attr.startswith(prefix):
                continue
            v = getattr(lib, attr, None)
            suffix = attr[len(prefix):]
            if (isinstance(v, int) and v > 0 and v & (v - 1) == 0 and v not in table
                    and suffix not in ("None", "All", "UserDefinedClocks")):
                table[v] = _snake(suffix)
    return table


def decode_throttle_reasons(mask: int | None, names: dict[int, str] | None = None) -> list[str] | None:
    """Names of the bits set in a clock event/throttle reason mask, lowest bit first; unknown bits as hex."""
    if not isinstance(mask, int):
        return None
    table = THROTTLE_REASONS if names is None else names
    out = []
    bit = 1
    while bit <= mask:
        if mask & bit:
            out.append(table.get(bit, f"unknown_{bit:#x}"))
        bit <<= 1
    return out


_VALUE_FIELDS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


def _sample_value(value: Any, vtype: Any) -> float | None:
    """A c_nvmlValue_t union read by its NVML_VALUE_TYPE (plain numbers pass through)."""
    if isinstance(value, (int, float)):
        return value
    if value is None:
        return None
    field = _VALUE_FIELDS.get(vtype if isinstance(vtype, int) else -1, "uiVal")
    v = getattr(value, field, None)
    return v if isinstance(v, (int, float)) else None
