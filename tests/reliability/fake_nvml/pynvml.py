"""A pynvml for the end-to-end NVML fault tests (put this folder and tests/ on PYTHONPATH):

    YD_FAKE_NVML=raising   NVML starts and lists one H200, then every query about it raises
    YD_FAKE_NVML=broken    nvmlInit itself raises an exception pynvml never raises (OSError)

The fake replaces this module with tests/fakes.py's FakeNvmlLib, the one the unit tests use."""

import os
import sys

from fakes import H200, FakeNvmlLib

MODE = os.environ.get("YD_FAKE_NVML", "raising")
ANSWERS = {"nvmlInit", "nvmlShutdown", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex", "nvmlDeviceGetName",
           "nvmlDeviceGetUUID"}


class RaisingNvml(FakeNvmlLib):
    def __getattribute__(self, name):
        if name.startswith("nvml") and name not in ANSWERS:
            def fail(*args, **kwargs):
                raise FakeNvmlLib.NVMLError(f"{name}: GPU is lost", value=15)

            return fail
        return super().__getattribute__(name)


class BrokenNvml(FakeNvmlLib):
    def nvmlInit(self):
        raise OSError("libnvidia-ml.so.1: cannot open shared object file")


sys.modules[__name__] = (BrokenNvml if MODE == "broken" else RaisingNvml)([H200])
