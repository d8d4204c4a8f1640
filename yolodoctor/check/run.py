"""`yolodoctor check`: run every probe in order, each reading the facts of those before it; then the rules judge
the facts of them all (the same rule engine as `diagnose`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yolodoctor.check.config import probe_config
from yolodoctor.check.environment import (
    env_flag,
    missing_devices,
    probe_environment,
    weights_facts,
)
from yolodoctor.check.probe import ProbeResult
from yolodoctor.check.resources import probe_resources
from yolodoctor.check.storage import probe_storage
from yolodoctor.findings import Finding, Severity

if TYPE_CHECKING:
    from yolodoctor.diagnosis.rules import Compiled

MODEL_TASKS = {"-seg": "segment", "-pose": "pose", "-obb": "obb", "-cls": "classify"}


@dataclass
class CheckReport:
    args: dict[str, Any]
    facts: dict[str, Any] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)


def task_of(user: dict[str, Any]) -> str | None:
    """The task the training runs: the model's, where its name tells it (a -cls, -seg, -pose or -obb model wins over
    task=, as Ultralytics' model decides the trainer: engine/model.py, cfg/__init__.py), else task=, else None."""
    stem = Path(str(user.get("model") or "")).stem
    by_model = next((t for suffix, t in MODEL_TASKS.items() if stem.endswith(suffix) or suffix + "." in stem), None)
    if by_model:
        return by_model
    return str(user["task"]) if user.get("task") else None


def dataset_task(user: dict[str, Any], data: Any) -> str | None:
    """The task check reads data= for: task_of, and for a folder without a yaml given to a model of Ultralytics'
    detection family (yolo11n.pt, yolov8s.yaml, rtdetr-l.pt: no task suffix) "detect", where Ultralytics looks for a
    data.yaml in the folder and stops (find_dataset_yaml, ultralytics/data/utils.py); with no model given, a folder
    of class folders is read as the classification dataset it is."""
    task = task_of(user)
    if task is not None or not user.get("model"):
        return task
    stem = Path(str(user["model"])).stem.lower()
    try:
        folder = Path(str(data))
        bare = folder.is_dir() and not any(folder.glob("*.yaml")) and not any(folder.glob("*.yml"))
    except (OSError, ValueError):
        bare = False
    return "detect" if bare and stem.startswith(("yolo", "rtdetr")) else None


def run_check(user: dict[str, Any], args: dict[str, Any], *, torch_flags: dict[str, Any] | None = None,
              cold: bool = True, log: Callable[[str], None] | None = None,
              rules: list[Compiled] | tuple[Compiled, ...] | None = None) -> CheckReport:
    """``user``: the arguments given; ``args``: effective arguments (Ultralytics defaults filled in); ``rules``: the
    compiled rules to judge the facts with (default: the built-in ones)."""
    from yolodoctor.diagnosis.engine import evaluate
    from yolodoctor.diagnosis.rules import builtin_rules

    report = CheckReport(args=args)
    acc = ProbeResult()

    def step(name: str, fn: Callable[[], Any]) -> Any:
        if log:
            log(f"checking {name}...")
        t = time.perf_counter()
        out = fn()
        report.seconds[name] = round(time.perf_counter() - t, 3)
        if isinstance(out, ProbeResult):
            acc.merge(out)
        return out

    step("environment", lambda: probe_environment(args))
    images: list[Path] = []
    if args.get("data"):
        from yolodoctor.check.dataset import check_dataset

        ds = step("dataset", lambda: check_dataset(args["data"], task=dataset_task(user, args["data"]),
                                                    split=_split(args)))
        if ds.index is not None:
            images = list(ds.index.splits.get("train") or [])
    acc.facts["check.data_given"] = bool(args.get("data"))
    step("resources", lambda: probe_resources(args, acc.facts))
    step("storage", lambda: probe_storage(images, args, acc.facts, cold=cold))
    step("config", lambda: probe_config(user, args, acc.facts, torch_flags))
    report.facts = acc.facts
    report.findings = evaluate(rules if rules is not None else builtin_rules(), acc.facts)[0]
    report.facts["check.seconds"] = report.seconds
    return report


def _split(args: dict[str, Any]) -> str:
    """The split a classification training validates on (args.split, 'val' by default)."""
    return str(args.get("split") or "val")


# a data.yaml Ultralytics refuses before training: it does not parse, lacks keys, has values of the wrong type or
# names that do not match nc, points nowhere or at a split without images, or has an unusable kpt_shape; a
# classification folder it stops on: no folder for its copy of a folder without train/, no training images, no
# validation folder, or no validation image in a train class (as errors)
UNLOADABLE = {"DS001", "DS002", "DS003", "DS004", "DS005", "DS007", "DS008", "DS120", "DS121", "DS122", "DS124"}


def quick_check(user: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """The probes `profile` runs before training (no torch import): dataset, resources, a warm decode sample and
    the configuration. Returns the facts; a data.yaml that cannot load is an InputError (exit 2)."""
    from yolodoctor.api.nvml import visible_now
    from yolodoctor.check.dataset import check_dataset
    from yolodoctor.devices import parse_device
    from yolodoctor.errors import InputError, UsageError

    acc = ProbeResult()
    gpus = visible_now()
    dev = parse_device(args.get("device"), bool(gpus))
    if gpus and (why := missing_devices(dev, len(gpus))) is not None:  # without NVML the count is not known here
        raise UsageError(why)
    if env_flag("YOLO_OFFLINE"):  # weights that are not here cannot come: refused (online, Ultralytics may fetch them)
        weights = ProbeResult(facts={**weights_facts(str(args.get("model") or "")), "env.online": False,
                                     "env.yolo_offline": True})
        if (absent := next((f for f in weights.findings if f.severity is Severity.error), None)) is not None:
            raise InputError(absent.message)
    acc.facts["env.device_kind"] = dev.kind
    acc.facts["env.torch_devices"] = [{"index": i} for i in range(len(gpus))]
    images: list[Path] = []
    if args.get("data"):
        ds = check_dataset(args["data"], task=dataset_task(user, args["data"]), split=_split(args))
        broken = [f for f in ds.findings if f.id in UNLOADABLE and f.severity.name == "error"]
        if broken:
            why = broken[0].message
            raise InputError(why if str(args["data"]) in why else f"{args['data']}: {why}")
        acc.merge(ds)
        if ds.index is not None:
            images = list(ds.index.splits.get("train") or [])
    acc.merge(probe_resources(args, acc.facts))
    acc.merge(probe_storage(images, args, acc.facts, cold=False, sample=16))
    acc.merge(probe_config(user, args, acc.facts))
    return acc.facts
