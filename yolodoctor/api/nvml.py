"""NVML through nvidia-ml-py (pynvml), nvitop style: every query returns a value or None, never raises.

A missing library, a machine without a GPU or a driver error are facts (``Nvml.unavailable_reason``), not errors.
"""

from __future__ import annotations

import os
import threading
from dataclasses import asdict, dataclass
from typing import Any, Callable, TypeVar

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
                import pynvml as lib  # nvidia-ml-py
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

    def close(self) -> None:
        if self._lib is not None:
            try:
                self._lib.nvmlShutdown()
            except Exception:
                pass


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
