"""The training process of `yolodoctor profile KEY=VALUE`: Ultralytics' own train() with the session attached.

    python -m yolodoctor.profiling.child RUN_DIR     (reads RUN_DIR/spec.json)

It ends with a ``run_end`` event saying how the training ended, and exits 0 (complete), 1 (crashed, out of memory),
130 (SIGINT) or 143 (SIGTERM). Everything it prints is Ultralytics' log.
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


def main(run_dir: str) -> int:
    signals.install()
    session = Session(run_dir)
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
