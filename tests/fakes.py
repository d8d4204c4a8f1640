"""Recorded machines for the CPU suite: a fake pynvml and torch facts of real GPUs."""

from __future__ import annotations

from types import SimpleNamespace

H200_UUID = "GPU-5e6f7a8b-1111-2222-3333-444455556666"
T4_UUID = "GPU-0a0b0c0d-aaaa-bbbb-cccc-ddddeeeeffff"


class FakeNvmlLib:
    """Just enough of pynvml: a list of GPUs, each a dict of what NVML would answer. ``fail`` names calls that raise."""

    class NVMLError(Exception):
        pass

    def __init__(self, gpus: list[dict], fail: set[str] | None = None, init_error: str | None = None) -> None:
        self.gpus = gpus
        self.fail = fail or set()
        self.init_error = init_error

    def __getattr__(self, name):
        raise AttributeError(name)

    def _check(self, name: str) -> None:
        if name in self.fail:
            raise self.NVMLError(f"{name} failed")

    def nvmlInit(self):
        if self.init_error:
            raise self.NVMLError(self.init_error)

    def nvmlShutdown(self):
        pass

    def nvmlSystemGetDriverVersion(self):
        self._check("nvmlSystemGetDriverVersion")
        return b"580.65.06"

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return 13000

    def nvmlDeviceGetCount(self):
        self._check("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetUUID(self, h):
        self._check("nvmlDeviceGetUUID")
        return self.gpus[h]["uuid"]

    def nvmlDeviceGetName(self, h):
        return self.gpus[h]["name"]

    def nvmlDeviceGetMemoryInfo(self, h):
        self._check("nvmlDeviceGetMemoryInfo")
        return SimpleNamespace(total=self.gpus[h]["memory"], used=0, free=self.gpus[h]["memory"])

    def nvmlDeviceGetCudaComputeCapability(self, h):
        return self.gpus[h]["cc"]

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h):
        return 5

    def nvmlDeviceGetCurrPcieLinkWidth(self, h):
        return 16

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return 700000


H200 = {"uuid": H200_UUID, "name": "NVIDIA H200", "memory": 150_754_820_096, "cc": (9, 0)}
T4 = {"uuid": T4_UUID, "name": "Tesla T4", "memory": 16_106_127_360, "cc": (7, 5)}


def torch_info(*gpus: dict, cuda: bool = True) -> dict:
    return {
        "env.torch": "2.11.0+cu130", "env.torch_cuda_build": "13.0", "env.cudnn": 91002,
        "env.cuda_available": cuda and bool(gpus),
        "env.torch_devices": [
            {"index": i, "name": g["name"], "uuid": g["uuid"].removeprefix("GPU-"),
             "compute_capability": list(g["cc"]), "memory_total": g["memory"]}
            for i, g in enumerate(gpus)] if cuda else [],
        "env.tf32_matmul": False, "env.tf32_cudnn": True,
    }


def ultra_info(**over) -> dict:
    d = {"env.ultralytics": "8.4.190", "env.amp_weights_present": False, "env.amp_weights_path": "/w/yolo26n.pt",
         "env.font_present": False, "env.cloudpickle": False}
    d.update({f"env.{k}": v for k, v in over.items()})
    return d
