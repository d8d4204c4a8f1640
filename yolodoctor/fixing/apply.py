"""Relaunching a training with verified changes, and rolling back to the original arguments when it fails."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yolodoctor.record.rundir import fresh_dir

if TYPE_CHECKING:
    from yolodoctor.fixing.planner import Change
    from yolodoctor.record.settings import Settings


def planned_images(settings: Settings) -> float | None:
    """The images the user's training processes: epochs x images per epoch, from its effective settings."""
    e, n = settings.get("epochs"), settings.get("images_per_epoch")
    return float(e * n) if isinstance(e, (int, float)) and isinstance(n, (int, float)) and e > 0 and n > 0 else None


def seed_of(settings: Settings, args: dict[str, Any]) -> int:
    """The training's seed: as it ran, else as asked, else Ultralytics' default 0."""
    for v in (settings.get("seed"), args.get("seed")):
        if v is None:
            continue
        try:
            return int(v)
        except (TypeError, ValueError):
            continue
    return 0


LIGHT_HZ = 1.0  # the applied run's sampler rate: a few samples, enough for its facts, not a profile's 5 Hz


def relaunch(base_args: dict[str, Any], changes: list[Change], run_dir: Path, log: Callable[[str], None],
             command: list[str] | None = None, probes: bool = False) -> dict[str, Any]:
    """Relaunch the whole training with the changes, recorded lightly (its steps, its wall phases and samples at
    LIGHT_HZ: what tells whether the change helped); ``probes``: also the profiler trace and the loader's own timing
    after it, as `profile` records them. On failure, roll back to the original arguments. A script runs unedited:
    its trainers receive the changed arguments through the injected hook."""
    from yolodoctor.errors import Interrupted
    from yolodoctor.fixing.planner import split
    from yolodoctor.profiling.runner import Measurement, run_profile, stopped_by_signal

    attempts = [("plan", changes), ("original arguments", [])]
    result: dict[str, Any] = {"rolled_back": False, "attempts": []}
    for name, cs in attempts:
        changed, env, flags = split(cs)
        log(f"applying {name}: " + (" ".join(f"{k}={v}" for k, v in changed.items()) or "no change"))
        out, prof = run_profile(None if command else dict(base_args), command=command, overrides=changed,
                                measure=Measurement(steps=None, trace=probes, loader_seconds=8.0 if probes else 0,
                                                    hz=5.0 if probes else LIGHT_HZ),
                                out=fresh_dir(run_dir.parent / f"fix-{run_dir.name}"), env_extra=env,
                                torch_flags=flags)
        if (code := stopped_by_signal(prof)) is not None:  # Ctrl-C / SIGTERM: stop here, no rollback run
            raise Interrupted(f"{prof.reason}: fix --apply stopped; the run so far is saved in {out}, marked "
                              "incomplete", code)
        result["attempts"].append({"name": name, "run_dir": str(out), "status": prof.status, "reason": prof.reason})
        result.update(run_dir=str(out), status=prof.status, applied=name, relaunched=True,
                      changes=[c.to_dict() for c in cs], probes=probes)
        if prof.status == "complete":
            break
        result["rolled_back"] = True
        result["rollback_reason"] = f"{name} failed: {prof.reason}"
        log(f"{name} failed ({prof.reason}); rolling back")
    return result
