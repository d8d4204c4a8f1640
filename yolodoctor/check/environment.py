"""Environment probe: Python, torch, CUDA/cuDNN, GPUs (torch and NVML, matched by UUID), Ultralytics, offline hazards.

Finding ids (category environment unless noted):
  EN101 no-cuda-gpu           info     training will run on the CPU
  EN102 torch-nvml-mismatch   warning  torch and NVML disagree on the visible GPUs
  EN103 torch-cannot-use-gpu  warning/error  NVML sees a GPU but this torch build cannot use it
  EN104 nvml-unavailable      info     a CUDA GPU without NVML: GPU telemetry will be limited
  EN105 device-not-present    error    device= names a CUDA device this machine does not have
  EN110 amp-check-download    warning  amp=True runs check_amp, which downloads yolo26n.pt
  EN111 font-download         info     plots fetch Arial.ttf from the network
  EN112 ddp-cloudpickle       warning  DDP pip-installs cloudpickle on first launch
  EN113 model-weights-absent  info/warning/error  model= names weights not on this machine (a download, or none)
  EN120 bf16-available        info     (precision) the GPU runs bf16: amp='bf16' skips the AMP check and GradScaler
  EN121 amp-disabled-on-gpu   warning  (precision) Ultralytics disables AMP on this GPU model
"""

from __future__ import annotations

import importlib.util
import os
import platform
import re
import socket
import sys
import threading
from pathlib import Path
from typing import Any

from yolodoctor.api.nvml import GpuInfo, Nvml, normalise_uuid, visible_gpus
from yolodoctor.check.device import DeviceRequest, parse_device
from yolodoctor.check.probe import ProbeResult
from yolodoctor.findings import Finding, Fix, Severity

# Ultralytics' check_amp disables AMP on these GPUs (ultralytics/utils/checks.py, 8.4).
AMP_BROKEN_GPUS = re.compile(
    r"(nvidia|geforce|quadro|tesla).*?(1660|1650|1630|t400|t550|t600|t1000|t1200|t2000|k40m)", re.IGNORECASE
)


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
    try:
        facts["env.cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    except Exception:
        pass
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
    os.environ.setdefault("YOLO_VERBOSE", "False")
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
                      is_online: bool | None | str = "probe") -> ProbeResult:
    """Facts and findings about the software and hardware the training would run on.

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
    _gpu_findings(res, dev, gpus, args)
    _offline_findings(res, dev, args)
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


def _gpu_findings(res: ProbeResult, dev: DeviceRequest, gpus: list[GpuInfo], args: dict[str, Any]) -> None:
    f = res.facts
    tdevs = f["env.torch_devices"]
    if (why := missing_devices(dev, len(tdevs) if f["env.cuda_available"] else 0)) is not None:
        res.findings.append(Finding(
            "EN105", "device-not-present", "environment", Severity.error,
            f"{why}: Ultralytics refuses to train.",
            evidence={"device": args.get("device"), "cuda_devices": len(tdevs)},
            fix=Fix(note="use device=0 (or a listed index), device=cpu, or leave device unset"),
        ))
    if not f["env.cuda_available"]:
        if gpus:
            asked_gpu = dev.kind == "cuda" and not dev.auto
            res.findings.append(Finding(
                "EN103", "torch-cannot-use-gpu", "environment", Severity.error if asked_gpu else Severity.warning,
                f"NVML sees {len(gpus)} GPU(s) ({gpus[0].name}) but torch {f['env.torch']} cannot use CUDA"
                f" (built for CUDA {f['env.torch_cuda_build'] or 'none'}): training would run on the CPU.",
                evidence={"nvml_gpus": [g.name for g in gpus], "torch_cuda_build": f["env.torch_cuda_build"],
                          "driver": f.get("env.driver"), "cuda_driver": f.get("env.cuda_driver")},
                fix=Fix(note="install a torch build whose CUDA version the driver supports (pytorch.org)"),
            ))
        else:
            res.findings.append(Finding(
                "EN101", "no-cuda-gpu", "environment", Severity.info,
                "No CUDA GPU is visible: training runs on the CPU, where Ultralytics forces workers=0 and AMP off.",
                evidence={"cuda_available": False, "nvml": f["env.nvml_reason"] or "no GPUs"},
            ))
        return
    if not f["env.nvml"]:
        res.findings.append(Finding(
            "EN104", "nvml-unavailable", "environment", Severity.info,
            f"torch sees {len(tdevs)} CUDA device(s) but NVML is unavailable ({f['env.nvml_reason']}): GPU"
            " utilisation, clocks and power cannot be sampled; diagnoses rest on the trace alone.",
            evidence={"reason": f["env.nvml_reason"]},
        ))
    else:
        pairs, problems = match_devices(tdevs, gpus)
        f["env.device_map"] = pairs
        if problems:
            res.findings.append(Finding(
                "EN102", "torch-nvml-mismatch", "environment", Severity.warning,
                "torch and NVML disagree on the visible GPUs: " + "; ".join(problems) + ".",
                evidence={"torch": tdevs, "nvml": [g.to_dict() for g in gpus], "pairs": pairs},
                fix=Fix(note="check CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER=PCI_BUS_ID"),
            ))
    used = [d for d in tdevs if d["index"] in dev.indices] or tdevs[:1]
    if not used:
        return
    gpu = used[0]
    caps = capabilities(gpu["compute_capability"])
    f["gpu.name"] = gpu["name"]
    f["gpu.compute_capability"] = gpu["compute_capability"]
    f["gpu.memory_total"] = gpu["memory_total"]
    f.update({f"gpu.supports_{k}": v for k, v in caps.items()})
    amp = args.get("amp", True)
    if AMP_BROKEN_GPUS.search(gpu["name"]) and amp not in (False, "fp32"):
        res.findings.append(Finding(
            "EN121", "amp-disabled-on-gpu", "precision", Severity.warning,
            f"Ultralytics disables AMP on {gpu['name']} (known NaN/zero-mAP issues): training runs in float32.",
            evidence={"gpu": gpu["name"]},
        ))
    elif caps["bf16"] and amp in (True, "fp16"):
        res.findings.append(Finding(
            "EN120", "bf16-available", "precision", Severity.info,
            f"{gpu['name']} (compute capability {gpu['compute_capability'][0]}.{gpu['compute_capability'][1]}) runs"
            " bf16: amp='bf16' needs no GradScaler and skips the AMP check and its yolo26n.pt download.",
            evidence={"compute_capability": gpu["compute_capability"], "amp": amp},
            fix=Fix(args={"amp": "bf16"}, safety="unsafe", changes_training=True),
        ))


def _offline_findings(res: ProbeResult, dev: DeviceRequest, args: dict[str, Any]) -> None:
    f = res.facts
    offline_flag = f["env.yolo_offline"]
    amp = args.get("amp", True)
    if dev.kind == "cuda" and f["env.cuda_available"] and amp in (True, "fp16") and not f["env.amp_weights_present"]:
        sev = Severity.info if f["env.online"] or offline_flag else Severity.warning
        where = ("YOLO_OFFLINE=1 is set: the check will be skipped and AMP kept on" if offline_flag else
                 "this machine looks offline: the download will fail, then the check is skipped and AMP kept on"
                 if f["env.online"] is not True else "it downloads once, about 5 MB")
        res.findings.append(Finding(
            "EN110", "amp-check-download", "environment", sev,
            f"amp=True runs Ultralytics' AMP check, which loads {f['env.amp_weights_path']} ({where}).",
            evidence={"weights_present": False, "online": f["env.online"], "yolo_offline": offline_flag},
            fix=None if offline_flag else Fix(env={"YOLO_OFFLINE": "1"}),
        ))
    if args.get("plots", True) and not f["env.font_present"] and not offline_flag:
        res.findings.append(Finding(
            "EN111", "font-download", "environment", Severity.info if f["env.online"] else Severity.warning,
            "Plots and dataset checks fetch Arial.ttf on first use; offline this can stall training start.",
            evidence={"font_present": False, "online": f["env.online"]},
            fix=Fix(env={"YOLO_OFFLINE": "1"}),
        ))
    weights_findings(res, str(args.get("model") or ""), online=bool(f["env.online"]) and not offline_flag)
    if dev.gpus > 1 and not f["env.cloudpickle"]:
        res.findings.append(Finding(
            "EN112", "ddp-cloudpickle", "environment", Severity.info if f["env.online"] else Severity.warning,
            f"device={args.get('device')} trains with DDP, which pip-installs cloudpickle on first launch"
            " (fails offline).",
            evidence={"gpus": dev.gpus, "cloudpickle": False, "online": f["env.online"]},
            fix=Fix(note="pip install 'cloudpickle>=3.1.1' before training"),
        ))


def weights_findings(res: ProbeResult, model: str, online: bool) -> None:
    """model=*.pt that is neither a file here nor in Ultralytics' weights_dir: training downloads it (one of
    Ultralytics' release assets) or looks for it among the latest release's assets and fails without it
    (utils/downloads.py attempt_download_asset). URLs and model .yaml files are left to Ultralytics."""
    if not model.endswith((".pt", ".pth")) or "://" in model or os.path.exists(model):
        return
    from ultralytics.utils import SETTINGS
    from ultralytics.utils.downloads import GITHUB_ASSETS_NAMES

    if (Path(SETTINGS["weights_dir"]) / model).exists():
        return

    if Path(model).name in GITHUB_ASSETS_NAMES:
        sev, what = (Severity.info, "Ultralytics downloads it before training") if online else \
            (Severity.warning, "Ultralytics would download it before training, and this machine is offline")
    else:
        sev, what = (Severity.warning, "it is not one of Ultralytics' release assets either: training fails unless "
                     "the latest release on GitHub has it") if online else \
            (Severity.error, "it is not one of Ultralytics' release assets, and offline nothing can be downloaded: "
                             "training fails")
    res.findings.append(Finding(
        "EN113", "model-weights-absent", "environment", sev,
        f"model={model} is not a file here nor in Ultralytics' weights_dir: {what}.",
        evidence={"model": model, "online": online},
        fix=Fix(note="give the path of the weights file, or a model .yaml to train from scratch"),
    ))
