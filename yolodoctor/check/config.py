"""Configuration probe: train arguments that conflict with each other or with the machine.

Finding ids (category config unless noted):
  CF101 autobatch-with-cudnn-benchmark  warning  batch=-1 is refused while cudnn.benchmark is on
  CF102 amp-on-cpu                      info     (precision) AMP asked for on the CPU, where Ultralytics ignores it
  CF103 compile-on-cpu                  warning  compile on the CPU: long compilation, no CUDA graphs
  CF104 batch-above-nbs                 warning  batch > nbs: the effective batch and weight decay change
  CF105 deterministic-cost              info     deterministic=True restricts cuDNN and torch to deterministic kernels
"""

from __future__ import annotations

from typing import Any

from yolodoctor.check.probe import ProbeResult
from yolodoctor.findings import Finding, Fix, Severity


def probe_config(user: dict[str, Any], args: dict[str, Any], facts: dict[str, Any],
                 torch_flags: dict[str, Any] | None = None) -> ProbeResult:
    """``user`` holds the arguments the user gave, ``args`` the effective ones (defaults filled in)."""
    res = ProbeResult()
    torch_flags = torch_flags or {}
    kind = facts.get("env.device_kind")
    batch, nbs = args.get("batch", 16), args.get("nbs", 64) or 64
    res.facts["config.accumulate"] = max(round(nbs / batch), 1) if isinstance(batch, int) and batch > 0 else None
    res.facts["config.effective_batch"] = (
        batch * res.facts["config.accumulate"] if res.facts["config.accumulate"] else None)

    if batch == -1 or (isinstance(batch, float) and 0 < batch < 1):
        if torch_flags.get("cudnn.benchmark") and kind == "cuda":
            res.findings.append(Finding(
                "CF101", "autobatch-with-cudnn-benchmark", "config", Severity.warning,
                f"batch={batch} asks AutoBatch to size the batch, but it refuses while torch.backends.cudnn.benchmark"
                " is on and falls back to batch 16.",
                evidence={"batch": batch, "cudnn.benchmark": True},
                fix=Fix(torch_flags={"cudnn.benchmark": False}),
            ))
    if kind in ("cpu", "mps"):
        if "amp" in user and user["amp"] not in (False, "fp32"):
            res.findings.append(Finding(
                "CF102", "amp-on-cpu", "precision", Severity.info,
                f"amp={user['amp']!r} has no effect on the {kind.upper()}: Ultralytics trains in float32 there.",
                evidence={"amp": user["amp"], "device": kind},
            ))
        if args.get("compile"):
            res.findings.append(Finding(
                "CF103", "compile-on-cpu", "config", Severity.warning,
                f"compile={args['compile']!r} on the {kind.upper()}: inductor compiles for minutes and"
                " 'reduce-overhead' (CUDA graphs) does nothing there.",
                evidence={"compile": args["compile"], "device": kind},
                fix=Fix(args={"compile": False}),
            ))
    if isinstance(batch, int) and batch > nbs:
        res.findings.append(Finding(
            "CF104", "batch-above-nbs", "config", Severity.warning,
            f"batch={batch} is above nbs={nbs}: gradients are no longer accumulated to {nbs} images, so each optimizer"
            f" step sees {batch} images and weight decay is rescaled: this trains a different optimisation.",
            evidence={"batch": batch, "nbs": nbs, "accumulate": 1},
            fix=Fix(args={"batch": nbs}, note="or keep the larger batch knowingly: it is a different optimisation"),
        ))
    if kind == "cuda" and args.get("deterministic", True):
        res.findings.append(Finding(
            "CF105", "deterministic-cost", "config", Severity.info,
            "deterministic=True (the default) forces deterministic cuDNN algorithms and"
            " torch.use_deterministic_algorithms(warn_only=True); `yolodoctor profile` measures what it costs.",
            evidence={"deterministic": True},
            fix=Fix(args={"deterministic": False}),
        ))
    return res
