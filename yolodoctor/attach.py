"""`yolodoctor.attach(model)`: profile the next ``model.train()`` of a notebook or script, in process.

    import yolodoctor
    run_dir = yolodoctor.attach(model, steps=200)   # None: the whole training
    model.train(data=..., epochs=...)
    # then: yolodoctor diagnose RUN_DIR

The sampler runs as a side process on this process; the record is finalised when the training ends. One attach
covers one train() call (attach again for the next).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from yolodoctor.record.profile import SAMPLES, SPEC, Profile
from yolodoctor.record.rundir import write_json_atomic


def attach(model: Any, *, out: str | Path | None = None, steps: int | str | None = None, trace: bool = True,
           loader_seconds: float = 8.0, hz: float = 5.0) -> Path:
    from yolodoctor.profiling import hostprobe
    from yolodoctor.profiling.runner import finalise, make_run_dir
    from yolodoctor.profiling.sampler_process import start_sampler, stop_sampler
    from yolodoctor.profiling.session import Session

    run = make_run_dir(out)
    spec: dict[str, Any] = {"mode": "attach", "args": {}, "command": None, "steps": steps, "trace": trace,
            "loader_capacity": loader_seconds > 0, "loader_seconds": loader_seconds}
    write_json_atomic(run / SPEC, spec)
    profile = Profile(mode="attach", steps_limit=steps if isinstance(steps, int) else None,
                      host_probe={"before": hostprobe.record()})
    profile.save(run)
    sampler = start_sampler(os.getpid(), run / SAMPLES, hz=hz, tid=threading.get_native_id())
    session = Session(run, spec)
    measure_loader = session._on_train_end

    def on_end(trainer: Any) -> None:
        try:
            measure_loader(trainer)
        finally:
            session.end("complete", None)
            stop_sampler(sampler)
            profile.host_probe = {**(profile.host_probe or {}), "after": hostprobe.record()}
            finalise(run, profile, 0)

    session.recorder.on_end = on_end
    session.attach(model)
    return run
