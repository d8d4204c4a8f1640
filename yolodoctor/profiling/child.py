"""The training process of `yolodoctor profile KEY=VALUE`: Ultralytics' own train() with the session attached.

    python -m yolodoctor.profiling.child RUN_DIR     (reads RUN_DIR/spec.json)

It ends with a ``run_end`` event saying how the training ended, and exits 0 (complete), 1 (crashed, out of memory),
130 (SIGINT) or 143 (SIGTERM). Everything it prints is Ultralytics' log.

With several GPUs (``device=0,1``, spec.json ``ddp``) this process only launches: Ultralytics' train() writes its
temporary DDP script, pickles the trainer's callbacks into it and runs torch.distributed.run. The callbacks are
then the module-level hooks that the injected sitecustomize registered (profiling/hooks.py), and each rank records
itself (events.jsonl for rank 0, events-rank{R}.jsonl); this process writes events-launcher.jsonl.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from yolodoctor.profiling import signals
from yolodoctor.profiling.session import Session, classify_error

TORCH_FLAGS = {"cudnn.benchmark", "cudnn.deterministic", "cudnn.allow_tf32", "cuda.matmul.allow_tf32"}


def apply_torch_flags(flags: dict) -> None:
    """Set torch.backends flags from the allow-list (a plan or a trial asks for them)."""
    import torch

    for name, value in flags.items():
        if name not in TORCH_FLAGS:
            raise ValueError(f"torch flag {name!r} is not one yolodoctor may change")
        group, attr = name.rsplit(".", 1)
        target = torch.backends
        for part in group.split("."):
            target = getattr(target, part)
        setattr(target, attr, bool(value))


def no_dataset_downloads() -> None:
    """Ultralytics' ``check_det_dataset`` runs a data.yaml's ``download:`` field (Python through exec, or a shell
    command) when the val path is missing. A training yolodoctor launches - a profile, a trial,
    ``fix --apply`` replaying recorded arguments - never does: the check runs with ``autodownload=False``, so a missing
    val path ends the training with Ultralytics' own "images not found" error, which the profile records."""
    from ultralytics.data import utils

    for holder in ("ultralytics.engine.trainer", "ultralytics.engine.validator"):  # each holds its own reference
        importlib.import_module(holder)

    original = utils.check_det_dataset

    def check_det_dataset(dataset: Any, autodownload: bool = True, split: str = "") -> Any:
        return original(dataset, autodownload=False, split=split)

    module: Any  # Ultralytics' modules, whose attributes are set here
    for name, module in list(sys.modules.items()):
        if name.startswith("ultralytics") and getattr(module, "__dict__", {}).get("check_det_dataset") is original:
            module.check_det_dataset = check_det_dataset


def launch_ddp(run_dir: str, spec: dict[str, Any]) -> int:
    """Ultralytics' own DDP launch, recorded in events-launcher.jsonl (the ranks record their training)."""
    import os
    import threading
    from pathlib import Path

    from yolodoctor.record.events import EventWriter
    from yolodoctor.record.profile import LAUNCHER_EVENTS

    events = EventWriter(Path(run_dir) / LAUNCHER_EVENTS)
    events.write("run_start", pid=os.getpid(), tid=threading.get_native_id(), rank=-1, launcher=True)
    status, reason, code = "complete", None, 0
    try:
        from ultralytics import YOLO

        events.write("imported")
        no_dataset_downloads()
        args = dict(spec["args"])
        apply_torch_flags(spec.get("torch_flags") or {})
        model = YOLO(args.pop("model"))
        events.write("model_built")
        model.train(**args)
    except BaseException as e:
        reason, code = classify_error(e)
        status = "incomplete"
        events.write("error", reason=reason)
    finally:
        events.write("run_end", status=status, reason=reason, launcher=True)
        events.close()
    return code


def main(run_dir: str) -> int:
    signals.install()
    import json
    from pathlib import Path

    from yolodoctor.record.profile import SPEC

    spec = json.loads((Path(run_dir) / SPEC).read_text())
    if spec.get("ddp"):
        return launch_ddp(run_dir, spec)
    session = Session(run_dir, spec)
    status, reason, code = "complete", None, 0
    try:
        from ultralytics import YOLO

        session.events.write("imported")
        no_dataset_downloads()
        args = dict(session.spec["args"])
        apply_torch_flags(session.spec.get("torch_flags") or {})
        model = YOLO(args.pop("model"))
        session.events.write("model_built")
        session.recorder.ends_process = True  # nothing follows train() here: a bounded run ends at its last step
        session.attach(model)
        model.train(**args)
    except BaseException as e:
        reason, code = classify_error(e)
        status = "incomplete"
        session.events.write("error", reason=reason)
    finally:
        session.end(status, reason)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
