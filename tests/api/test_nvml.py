"""The NVML wrapper: facts or None, never an exception."""

from __future__ import annotations

import sys

import pytest
from fakes import H200, H200_UUID, T4, T4_UUID, FakeNvmlLib

from yolodoctor.api.nvml import (
    THROTTLE_REASONS,
    GpuInfo,
    Nvml,
    decode_throttle_reasons,
    normalise_uuid,
    throttle_reason_names,
    visible_gpus,
)


def test_init_failure_is_a_reason_not_an_error():
    n = Nvml.open(FakeNvmlLib([H200], init_error="Driver Not Loaded"))
    assert not n.available and n.unavailable_reason == "NVML unavailable: Driver Not Loaded"
    # every query answers None (or nothing) instead of raising
    assert n.driver_version() is None and n.cuda_driver_version() is None
    assert n.handles() == [] and n.gpus() == [] and n.handle_by_uuid(H200_UUID) is None
    assert n.utilization(0) is None and n.memory_used(0) is None and n.power_w(0) is None
    assert n.pcie_throughput_kbps(0) == (None, None) and n.throttle_reasons(0) is None
    assert n.utilization_samples(0) is None and n.call("nvmlDeviceGetCount") is None
    n.close()


def test_missing_library_is_a_reason(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    n = Nvml.open()
    assert not n.available and n.unavailable_reason == "nvidia-ml-py is not installed"


def test_info_and_versions():
    n = Nvml.open(FakeNvmlLib([T4, H200]))
    assert n.available and n.unavailable_reason is None
    assert n.driver_version() == "580.65.06" and n.cuda_driver_version() == "13.0"
    g = n.gpus()[1]
    assert g == GpuInfo(1, H200_UUID, "NVIDIA H200", H200["memory"], (9, 0), 5, 16, 700.0)
    assert g.to_dict()["compute_capability"] == [9, 0]


def test_methods_return_none_on_errors():
    lib = FakeNvmlLib([H200], fail={"nvmlSystemGetDriverVersion", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetUUID",
                                    "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetClockInfo",
                                    "nvmlDeviceGetPowerUsage", "nvmlDeviceGetTemperature",
                                    "nvmlDeviceGetPcieThroughput", "nvmlDeviceGetCurrentClocksEventReasons",
                                    "nvmlDeviceGetCurrentClocksThrottleReasons", "nvmlDeviceGetSamples"})
    n = Nvml.open(lib)
    assert n.available
    assert n.driver_version() is None
    info = n.info(0, 0)
    assert info.uuid == "" and info.memory_total is None and info.name == "NVIDIA H200"
    assert n.utilization(0) is None and n.memory_used(0) is None and n.clock_mhz(0) is None
    assert n.power_w(0) is None and n.temperature_c(0) is None and n.pcie_throughput_kbps(0) == (None, None)
    assert n.throttle_reasons(0) is None and n.utilization_samples(0) is None
    assert n.handle_by_uuid(H200_UUID) is None  # UUIDs unreadable: no match rather than a wrong one
    assert n.call("nvmlDeviceGetNoSuchFunction", 0) is None


def test_sampling_methods_read_the_device():
    lib = FakeNvmlLib([dict(H200, util=93, mem_util=41, mem_used=7 << 30, sm_clock=1980, power_mw=455_500, temp=48,
                            pcie_rx=2_000_000, pcie_tx=15_000, throttle=0x5)])
    n = Nvml.open(lib)
    assert n.utilization(0) == {"gpu": 93, "memory": 41}
    assert n.memory_used(0) == (7 << 30, H200["memory"])
    assert n.clock_mhz(0, "sm") == 1980 and n.power_w(0) == 455.5 and n.temperature_c(0) == 48
    assert n.pcie_throughput_kbps(0) == (2_000_000, 15_000)
    assert n.throttle_reasons(0) == 0x5


def test_throttle_reasons_fall_back_to_the_deprecated_call():
    lib = FakeNvmlLib([dict(H200, throttle=0x8)], fail={"nvmlDeviceGetCurrentClocksEventReasons"})
    assert Nvml.open(lib).throttle_reasons(0) == 0x8


def test_utilization_samples_since_a_timestamp():
    lib = FakeNvmlLib([dict(H200, samples=[(1_000, 10), (2_000, 55), (3_000, 99)])])
    n = Nvml.open(lib)
    assert n.utilization_samples(0, 0) == [(1_000, 10), (2_000, 55), (3_000, 99)]
    assert n.utilization_samples(0, 2_000) == [(3_000, 99)]
    assert n.utilization_samples(0, 3_000) == []  # NVML_ERROR_NOT_FOUND: nothing new, not a failure


def test_utilization_samples_read_real_pynvml_structs():
    pynvml = pytest.importorskip("pynvml")
    s = pynvml.c_nvmlSample_t()
    s.timeStamp = 1_796_000_000_000_000
    s.sampleValue.uiVal = 87

    class Lib(FakeNvmlLib):
        def nvmlDeviceGetSamples(self, h, kind, last_ts):
            assert kind == pynvml.NVML_GPU_UTILIZATION_SAMPLES
            return pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, [s]

    assert Nvml.open(Lib([H200])).utilization_samples(0, 5) == [(1_796_000_000_000_000, 87)]


def test_handle_by_uuid_normalises_and_picks_the_right_gpu():
    n = Nvml.open(FakeNvmlLib([T4, H200]))
    assert n.handle_by_uuid(H200_UUID) == (1, 1)
    assert n.handle_by_uuid(H200_UUID.removeprefix("GPU-").lower()) == (1, 1)  # torch's spelling
    assert n.handle_by_uuid(T4_UUID.upper()) == (0, 0)
    assert n.handle_by_uuid("GPU-00000000-0000-0000-0000-000000000000") is None
    assert n.handle_by_uuid("") is None
    assert normalise_uuid("gpu-abc") == "GPU-ABC".removeprefix("GPU-") and normalise_uuid(None) == ""


def test_decode_throttle_reasons():
    assert decode_throttle_reasons(0) == []
    assert decode_throttle_reasons(None) is None
    assert decode_throttle_reasons(0x1) == ["gpu_idle"]
    assert decode_throttle_reasons(0x4 | 0x20 | 0x80) == ["sw_power_cap", "sw_thermal_slowdown",
                                                           "hw_power_brake_slowdown"]
    assert decode_throttle_reasons(0x8 | 0x10000) == ["hw_slowdown", "unknown_0x10000"]


def test_throttle_names_agree_with_pynvml():
    pynvml = pytest.importorskip("pynvml")
    names = throttle_reason_names(pynvml)
    assert names[pynvml.nvmlClocksThrottleReasonSwPowerCap] == "sw_power_cap"
    assert names[pynvml.nvmlClocksThrottleReasonHwThermalSlowdown] == "hw_thermal_slowdown"
    for bit, name in THROTTLE_REASONS.items():
        assert names[bit] == name
    assert all(bit & (bit - 1) == 0 for bit in names)  # single bits only: no None/All/aliases


GPUS = [GpuInfo(0, T4_UUID, "Tesla T4", None, None, None, None, None),
        GpuInfo(1, H200_UUID, "NVIDIA H200", None, None, None, None, None),
        GpuInfo(2, "GPU-5e6f0000-9999-2222-3333-444455556666", "NVIDIA H200", None, None, None, None, None)]


@pytest.mark.parametrize("spec, want", [
    (None, [0, 1, 2]),
    ("1", [1]),
    ("2,0", [2, 0]),  # torch's order is CUDA_VISIBLE_DEVICES' order
    ("0,7,1", [0]),  # CUDA stops at the first invalid entry
    ("", []),
    ("-1", []),
    ("GPU-0a0b", [0]),  # a unique UUID prefix
    ("0a0b0c0d-aaaa-bbbb-cccc-ddddeeeeffff,1", [0, 1]),  # without the GPU- prefix
    ("GPU-5e6f", []),  # ambiguous prefix: invalid, and everything after it is ignored
    ("GPU-5e6f7a8b", [1]),
])
def test_visible_gpus_honours_cuda_visible_devices(spec, want):
    env = {} if spec is None else {"CUDA_VISIBLE_DEVICES": spec}
    assert [g.index for g in visible_gpus(GPUS, env)] == want
