"""Which device a train run will use, read from the `device=` argument the way Ultralytics' select_device reads it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DeviceRequest:
    kind: str  # "cuda" | "cpu" | "mps" | "other"
    indices: tuple[int, ...] = ()  # CUDA ordinals as torch numbers them
    auto: bool = False  # no device given: Ultralytics picks cuda:0 when available, else cpu

    @property
    def gpus(self) -> int:
        return len(self.indices) if self.kind == "cuda" else 0


def ddp_requested(value: Any) -> bool:
    """Whether `device=` asks Ultralytics for several GPUs: it then trains them with DDP, launching
    torch.distributed.run with one process per GPU (``device=0,1``, or ``-1,-1`` for two idle ones)."""
    return parse_device(value, True).gpus > 1


def parse_device(value: Any, cuda_available: bool) -> DeviceRequest:
    if value is None or (isinstance(value, str) and value.strip() == ""):
        return DeviceRequest("cuda", (0,), auto=True) if cuda_available else DeviceRequest("cpu", auto=True)
    if isinstance(value, (list, tuple)):
        return DeviceRequest("cuda", tuple(int(v) for v in value))
    if isinstance(value, int):
        return DeviceRequest("cuda", (value,)) if value >= 0 else _auto(cuda_available)
    text = str(value).strip().lower().replace("cuda:", "").replace(" ", "").strip("[]()")
    if text == "cpu":
        return DeviceRequest("cpu")
    if text.startswith("mps"):
        return DeviceRequest("mps")
    parts = [p for p in text.split(",") if p]
    if parts and all(p.lstrip("-").isdigit() for p in parts):
        nums = [int(p) for p in parts]
        if all(n < 0 for n in nums):
            return _auto(cuda_available, len(nums))
        return DeviceRequest("cuda", tuple(nums))
    return DeviceRequest("other")


def _auto(cuda_available: bool, n: int = 1) -> DeviceRequest:
    if not cuda_available:
        return DeviceRequest("cpu", auto=True)
    return DeviceRequest("cuda", tuple(range(n)), auto=True)
