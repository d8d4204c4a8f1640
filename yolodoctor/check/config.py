"""Configuration probe: the train arguments and flags that may conflict with each other or with the machine.

It records them as facts (args.*, config.*); the CF1xx rules in rules/ judge them against the device the
environment probe found (env.device_kind).
"""

from __future__ import annotations

from typing import Any

from yolodoctor.check.probe import ProbeResult


def probe_config(user: dict[str, Any], args: dict[str, Any], facts: dict[str, Any],
                 torch_flags: dict[str, Any] | None = None) -> ProbeResult:
    """``user`` holds the arguments the user gave, ``args`` the effective ones (defaults filled in)."""
    res = ProbeResult(given=dict(facts))
    f = res.facts
    batch, nbs = args.get("batch", 16), args.get("nbs", 64) or 64
    f["config.accumulate"] = max(round(nbs / batch), 1) if isinstance(batch, int) and batch > 0 else None
    f["config.effective_batch"] = batch * f["config.accumulate"] if f["config.accumulate"] else None
    f["args.given"] = sorted(user)
    f["args.batch"] = batch
    f["args.nbs"] = nbs
    f["args.amp"] = args.get("amp", True)
    f["args.compile"] = args.get("compile")
    f["args.deterministic"] = args.get("deterministic", True)
    f["config.cudnn_benchmark"] = bool((torch_flags or {}).get("cudnn.benchmark"))
    return res
