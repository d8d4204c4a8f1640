"""Recorded machines for the CPU suite: a fake pynvml and torch facts of real GPUs; generated step streams."""

from __future__ import annotations

from types import SimpleNamespace

H200_UUID = "GPU-5e6f7a8b-1111-2222-3333-444455556666"
T4_UUID = "GPU-0a0b0c0d-aaaa-bbbb-cccc-ddddeeeeffff"


class FakeNvmlLib:
    """Just enough of pynvml: a list of GPUs, each a dict of what NVML would answer. ``fail`` names calls that raise."""

    class NVMLError(Exception):
        def __init__(self, msg: str = "", value: int | None = None) -> None:
            super().__init__(msg)
            self.value = value  # pynvml's NVMLError carries the NVML return code here

    # pynvml constants the sampler passes through
    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0
    NVML_PCIE_UTIL_TX_BYTES = 0
    NVML_PCIE_UTIL_RX_BYTES = 1
    NVML_GPU_UTILIZATION_SAMPLES = 1
    NVML_ERROR_NOT_FOUND = 6
    NVML_VALUE_TYPE_UNSIGNED_INT = 1

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
        used = self.gpus[h].get("mem_used", 0)
        return SimpleNamespace(total=self.gpus[h]["memory"], used=used, free=self.gpus[h]["memory"] - used)

    def nvmlDeviceGetCudaComputeCapability(self, h):
        return self.gpus[h]["cc"]

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h):
        return 5

    def nvmlDeviceGetCurrPcieLinkWidth(self, h):
        return 16

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return 700000

    # -- live telemetry (the sampler); each value comes from the GPU's dict, with an idle default ------------------

    def nvmlDeviceGetNvLinkState(self, h, link):
        """``self.gpus[h]["nvlink"]``: the links' states (1 active); like NVML, an error past the last link or on a
        GPU without NVLink."""
        links = self.gpus[h].get("nvlink") or []
        if link >= len(links):
            raise self.NVMLError("Not Supported")
        return links[link]

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        self._check("nvmlDeviceGetComputeRunningProcesses")
        return [SimpleNamespace(pid=p, usedGpuMemory=None) for p in self.gpus[h].get("pids", [])]

    def nvmlDeviceGetUtilizationRates(self, h):
        self._check("nvmlDeviceGetUtilizationRates")
        return SimpleNamespace(gpu=self.gpus[h].get("util", 0), memory=self.gpus[h].get("mem_util", 0))

    def nvmlDeviceGetClockInfo(self, h, clock_type):
        self._check("nvmlDeviceGetClockInfo")
        return self.gpus[h].get("sm_clock", 345) if clock_type == self.NVML_CLOCK_SM else 3201

    def nvmlDeviceGetPowerUsage(self, h):
        self._check("nvmlDeviceGetPowerUsage")
        return self.gpus[h].get("power_mw", 75_000)

    def nvmlDeviceGetTemperature(self, h, sensor):
        self._check("nvmlDeviceGetTemperature")
        return self.gpus[h].get("temp", 30)

    def nvmlDeviceGetPcieThroughput(self, h, counter):
        self._check("nvmlDeviceGetPcieThroughput")
        return self.gpus[h].get("pcie_rx" if counter == self.NVML_PCIE_UTIL_RX_BYTES else "pcie_tx", 0)

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        self._check("nvmlDeviceGetCurrentClocksEventReasons")
        return self.gpus[h].get("throttle", 0x1)

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):
        self._check("nvmlDeviceGetCurrentClocksThrottleReasons")
        return self.gpus[h].get("throttle", 0x1)

    def nvmlDeviceGetSamples(self, h, sampling_type, last_ts):
        """``self.gpus[h]["samples"]``: [(timestamp_us, value)]; like NVML, NOT_FOUND when none is newer."""
        self._check("nvmlDeviceGetSamples")
        new = [SimpleNamespace(timeStamp=ts, sampleValue=SimpleNamespace(uiVal=v))
               for ts, v in self.gpus[h].get("samples", []) if ts > last_ts]
        if not new:
            raise self.NVMLError("Not Found", value=self.NVML_ERROR_NOT_FOUND)
        return self.NVML_VALUE_TYPE_UNSIGNED_INT, new


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


def epochs(per_epoch, n_epochs, *, step_s=0.1, pause_s=5.0, images=8, ready=None, fast_refill=0, train_index=0,
           t=0.0, n0=0):
    """Step events of ``n_epochs`` epochs of ``per_epoch`` steps with a ``pause_s`` validation between epochs.
    ``ready(i)``: the queue's occupancy at the epoch's i-th step. ``fast_refill``: an epoch's first steps after a
    pause run this many times faster (served from the queue that refilled during the pause)."""
    out, n = [], n0
    for e in range(n_epochs):
        if e:
            t += pause_s
        for i in range(per_epoch):
            dt = step_s / 4 if e and i < fast_refill else step_s
            wait = 0.001
            s = {"type": "step", "epoch": e, "i": i, "n": n, "step": n, "train_index": train_index, "t0": t + wait,
                 "t1": t + wait + dt, "wait": wait, "compute": dt, "images": images, "loss": 1.0}
            if ready is not None:
                s["ready"] = ready(e, i)
            out.append(s)
            t += wait + dt
            n += 1
    return out
