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
    if user.get("task"):
        return str(user["task"])
    stem = Path(str(user.get("model") or "")).stem
    return next((t for suffix, t in MODEL_TASKS.items() if stem.endswith(suffix) or suffix + "." in stem), None)


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

        ds = step("dataset", lambda: check_dataset(args["data"], task=task_of(user)))
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


# a data.yaml Ultralytics refuses before training: it does not parse, lacks keys, has values of the wrong type or
# names that do not match nc, points nowhere or at a split without images, or has an unusable kpt_shape
UNLOADABLE = {"DS001", "DS002", "DS003", "DS004", "DS005", "DS007", "DS008"}


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
        ds = check_dataset(args["data"], task=task_of(user))
        broken = [f for f in ds.findings if f.id in UNLOADABLE and f.severity.name == "error"]
        if broken:
            raise InputError(f"{args['data']}: {broken[0].message}")
        acc.merge(ds)
        if ds.index is not None:
            images = list(ds.index.splits.get("train") or [])
    acc.merge(probe_resources(args, acc.facts))
    acc.merge(probe_storage(images, args, acc.facts, cold=False, sample=16))
    acc.merge(probe_config(user, args, acc.facts))
    return acc.facts
