"""Environment probe: Python, torch, CUDA/cuDNN, GPUs (torch and NVML, matched by UUID), Ultralytics, offline hazards.

It records what it finds (env.*, gpu.*, and the train arguments it reads, args.*); the EN1xx rules in rules/ judge
them (no GPU, torch and NVML disagreeing, a device that is not there, downloads an offline machine cannot make, AMP
on GPUs Ultralytics turns it off on, bf16 where the GPU has it).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import platform
import socket
import sys
import threading
from pathlib import Path
from typing import Any

from yolodoctor.api.nvml import GpuInfo, Nvml, normalise_uuid, visible_gpus
from yolodoctor.check.probe import ProbeResult
from yolodoctor.devices import DeviceRequest, parse_device


def env_flag(name: str, environ: dict[str, str] | None = None) -> bool:
    """Ultralytics' env_bool: '1', 'true', 'yes', 'on' (any case) are true."""
    return str((os.environ if environ is None else environ).get(name, "")).strip().lower() in {"1", "true", "yes", "on"}


def online(timeout: float = 1.5) -> bool | None:
    """Whether DNS resolves (what Ultralytics' is_online asks), bounded in time; None if it did not answer in time."""
    result: list[bool] = []

    def probe() -> None:
        for host in ("one.one.one.one", "dns.google"):
            try:
                socket.getaddrinfo(host, 0, socket.AF_UNSPEC, 0, 0, socket.AI_ADDRCONFIG)
                result.append(True)
                return
            except OSError:
                continue
        result.append(False)

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(timeout)
    return result[0] if result else None


def torch_facts() -> dict[str, Any]:
    import torch

    facts: dict[str, Any] = {
        "env.torch": torch.__version__,
        "env.torch_cuda_build": torch.version.cuda,
        "env.cudnn": None,
        "env.cuda_available": False,
        "env.torch_devices": [],
        "env.tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "env.tf32_cudnn": torch.backends.cudnn.allow_tf32,
    }
    with contextlib.suppress(Exception):
        facts["env.cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    try:
        facts["env.cuda_available"] = bool(torch.cuda.is_available())
    except Exception:
        facts["env.cuda_available"] = False
    if facts["env.cuda_available"]:
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            facts["env.torch_devices"].append(
                {
                    "index": i,
                    "name": p.name,
                    "uuid": str(getattr(p, "uuid", "") or ""),
                    "compute_capability": [p.major, p.minor],
                    "memory_total": int(p.total_memory),
                }
            )
    return facts


def ultralytics_facts() -> dict[str, Any]:
    from yolodoctor.ulenv import quiet_ultralytics

    quiet_ultralytics()
    import ultralytics
    from ultralytics.utils import USER_CONFIG_DIR, WEIGHTS_DIR

    return {
        "env.ultralytics": ultralytics.__version__,
        "env.amp_weights_present": (WEIGHTS_DIR / "yolo26n.pt").is_file(),
        "env.amp_weights_path": str(WEIGHTS_DIR / "yolo26n.pt"),
        "env.font_present": (USER_CONFIG_DIR / "Arial.ttf").is_file(),
        "env.cloudpickle": importlib.util.find_spec("cloudpickle") is not None,
    }


def match_devices(torch_devices: list[dict], nvml_gpus: list[GpuInfo]) -> tuple[list[dict], list[str]]:
    """Pair each torch device with the NVML GPU of the same UUID. Returns (pairs, problems)."""
    by_uuid = {normalise_uuid(g.uuid): g for g in nvml_gpus}
    pairs, problems = [], []
    for d in torch_devices:
        g = by_uuid.get(normalise_uuid(d.get("uuid")))
        if g is None:
            problems.append(f"torch cuda:{d['index']} ({d['name']}) has no NVML GPU with UUID {d.get('uuid') or '?'}")
        pairs.append({"torch_index": d["index"], "nvml_index": g.index if g else None, "uuid": d.get("uuid")})
    if len(torch_devices) != len(nvml_gpus):
        problems.append(f"torch sees {len(torch_devices)} CUDA device(s), NVML {len(nvml_gpus)} visible GPU(s)")
    return pairs, problems


def probe_environment(args: dict[str, Any], *, nvml: Nvml | None = None, torch_info: dict | None = None,
                      ultra_info: dict | None = None, environ: dict[str, str] | None = None,
                      is_online: bool | str | None = "probe") -> ProbeResult:
    """Facts about the software and hardware the training would run on.

    The keyword arguments let tests replay a recorded machine (fake NVML, torch and Ultralytics facts).
    """
    environ = dict(os.environ) if environ is None else environ
    res = ProbeResult()
    f = res.facts
    f["env.python"] = platform.python_version()
    f["env.platform"] = f"{platform.system()} {platform.machine()}"
    f["env.executable"] = sys.executable
    f.update(torch_info if torch_info is not None else torch_facts())
    f.update(ultra_info if ultra_info is not None else ultralytics_facts())
    f["env.yolo_offline"] = env_flag("YOLO_OFFLINE", environ)
    f["env.online"] = (online() if is_online == "probe" else is_online) if not f["env.yolo_offline"] else False

    own_nvml = nvml is None
    nvml = Nvml.open() if nvml is None else nvml
    try:
        all_gpus = nvml.gpus() if nvml.available else []
        f["env.nvml"] = nvml.available
        f["env.nvml_reason"] = nvml.unavailable_reason
        f["env.driver"] = nvml.driver_version()
        f["env.cuda_driver"] = nvml.cuda_driver_version()
    finally:
        if own_nvml:
            nvml.close()
    gpus = visible_gpus(all_gpus, environ)
    f["env.nvml_gpus"] = [g.to_dict() for g in gpus]

    dev = parse_device(args.get("device"), f["env.cuda_available"])
    f["env.device_kind"] = dev.kind
    f["env.device_indices"] = list(dev.indices)
    f["env.device_auto"] = dev.auto
    f["env.device_gpus"] = dev.gpus
    f["env.nvml_gpu_names"] = [g.name for g in gpus]
    f["args.device"] = args.get("device")
    f["args.amp"] = args.get("amp", True)
    f["args.plots"] = args.get("plots", True)
    _gpu_facts(res, dev, gpus)
    f.update(weights_facts(str(args.get("model") or "")))
    return res


def capabilities(cc: tuple[int, int] | list[int] | None) -> dict[str, bool | None]:
    if not cc:
        return {"amp": None, "bf16": None, "tf32": None}
    major = cc[0]
    return {"amp": major >= 7, "bf16": major >= 8, "tf32": major >= 8}


def missing_devices(dev: DeviceRequest, count: int) -> str | None:
    """Why an explicit device= cannot run on ``count`` visible CUDA devices (Ultralytics refuses it: "Invalid CUDA
    'device=7' requested"), or None."""
    absent = [i for i in dev.indices if i >= count] if dev.kind == "cuda" and not dev.auto else []
    if not absent:
        return None
    return (f"device={','.join(map(str, dev.indices))} asks for CUDA device {absent[0]}, but "
            f"{count or 'no'} CUDA device{'' if count == 1 else 's'} {'is' if count == 1 else 'are'} visible")


def _gpu_facts(res: ProbeResult, dev: DeviceRequest, gpus: list[GpuInfo]) -> None:
    f = res.facts
    tdevs = f["env.torch_devices"]
    if (why := missing_devices(dev, len(tdevs) if f["env.cuda_available"] else 0)) is not None:
        f["env.device_missing"] = why
    if not f["env.cuda_available"]:
        return
    if f["env.nvml"]:
        pairs, problems = match_devices(tdevs, gpus)
        f["env.device_map"] = pairs
        if problems:
            f["env.device_mismatch"] = "; ".join(problems)
    used = [d for d in tdevs if d["index"] in dev.indices] or tdevs[:1]
    if not used:
        return
    gpu = used[0]
    caps = capabilities(gpu["compute_capability"])
    f["gpu.name"] = gpu["name"]
    f["gpu.compute_capability"] = gpu["compute_capability"]
    f["gpu.cc_major"], f["gpu.cc_minor"] = gpu["compute_capability"][:2]
    f["gpu.memory_total"] = gpu["memory_total"]
    f.update({f"gpu.supports_{k}": v for k, v in caps.items()})


def weights_facts(model: str) -> dict[str, Any]:
    """model=*.pt that is neither a file here nor in Ultralytics' weights_dir: training downloads it (one of
    Ultralytics' release assets) or looks for it among the latest release's assets and fails without it
    (utils/downloads.py attempt_download_asset). URLs and model .yaml files are left to Ultralytics."""
    if not model.endswith((".pt", ".pth")) or "://" in model:
        return {}
    f: dict[str, Any] = {"args.model": model, "env.weights_missing": False}
    if os.path.exists(model):
        return f
    from ultralytics.utils import SETTINGS
    from ultralytics.utils.downloads import GITHUB_ASSETS_NAMES

    if (Path(SETTINGS["weights_dir"]) / model).exists():
        return f
    f["env.weights_missing"] = True
    f["env.weights_release_asset"] = Path(model).name in GITHUB_ASSETS_NAMES
    return f
