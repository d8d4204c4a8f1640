"""The training process of `yolodoctor profile KEY=VALUE`: Ultralytics' own train() with the recorder attached.

    python -m yolodoctor.profiling.child RUN_DIR     (reads RUN_DIR/spec.json)

It ends with a ``run_end`` event saying how the training ended, and exits 0 (complete), 1 (crashed, out of memory),
130 (SIGINT) or 143 (SIGTERM). Everything it prints is Ultralytics' log.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path

from yolodoctor.profile import EVENTS, SPEC
from yolodoctor.profiling import bounds
from yolodoctor.profiling.events import EventWriter
from yolodoctor.profiling.recorder import Recorder
from yolodoctor.profiling.trace import TraceWindow
from yolodoctor.rundir import write_json_atomic

ROLES = "roles.json"


class Terminated(BaseException):
    """SIGTERM, raised in the training thread so that the run ends through the same path as Ctrl-C."""


def _on_sigterm(signum, frame):
    raise Terminated()


def classify_error(e: BaseException) -> tuple[str, int]:
    if isinstance(e, KeyboardInterrupt):
        return "interrupted", 130
    if isinstance(e, Terminated):
        return "terminated", 143
    text = f"{type(e).__name__}: {e}"
    if "out of memory" in text.lower() or type(e).__name__ == "OutOfMemoryError":
        return "out-of-memory: " + text[:300], 1
    return "crashed: " + text[:300], 1


def main(run_dir: str) -> int:
    run = Path(run_dir)
    spec = json.loads((run / SPEC).read_text())
    signal.signal(signal.SIGTERM, _on_sigterm)
    events = EventWriter(run / EVENTS)
    events.write("run_start", pid=os.getpid(), tid=threading.get_native_id(), argv=sys.argv)

    def write_roles(roles: dict[int, str]) -> None:
        write_json_atomic(run / ROLES, {str(k): v for k, v in roles.items()})

    steps = spec.get("steps")
    trace = TraceWindow(run, on_done=lambda r: events.write("trace", **r)) if spec.get("trace", True) else None
    rec = Recorder(events, steps_limit=steps if isinstance(steps, int) else None, on_workers=write_roles,
                   trace=trace)

    def on_settings(settings: dict) -> None:
        if steps == "auto":
            rec.steps_limit = bounds.default_steps(settings.get("workers") or 0, settings.get("prefetch_factor"))
            events.write("steps_limit", steps=rec.steps_limit, rule="SETTLE + 3 x workers x prefetch_factor")
        if trace is not None:
            trace.cuda = str(settings.get("device", "")).startswith("cuda")
            if settings.get("compile_requested") == "reduce-overhead":
                trace.skip("compile='reduce-overhead' (CUDA graphs): no profiler trace, see DESIGN.md section 4")
                events.write("trace", skipped=trace.skipped)

    rec.on_settings = on_settings
    status, reason, code = "complete", None, 0
    try:
        from ultralytics import YOLO

        args = dict(spec["args"])
        model = YOLO(args.pop("model"))
        rec.attach(model)
        model.train(**args)
        if spec.get("loader_capacity", True) and getattr(model, "trainer", None) is not None:
            from yolodoctor.profiling import loader

            events.write("loader_capacity_start", mosaic=rec.last_mosaic)
            try:
                events.write("loader_capacity", **loader.measure(
                    model.trainer, mosaic=rec.last_mosaic, seconds=float(spec.get("loader_seconds", 8.0))))
            except Exception as e:  # the measurement is extra: its failure is a fact, not a failed training
                events.write("loader_capacity", error=f"{type(e).__name__}: {e}"[:300])
    except BaseException as e:  # noqa: BLE001 - every ending is recorded, then reported by the exit code
        reason, code = classify_error(e)
        status = "incomplete"
        events.write("error", reason=reason)
    finally:
        rec.finish()
        events.write("run_end", status=status, reason=reason, steps=rec.total_steps, bounded=rec.bounded)
        events.close()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
