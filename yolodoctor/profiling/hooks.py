"""Module-level Ultralytics callbacks for script mode (`yolodoctor profile -- COMMAND`).

They are plain functions of an importable module, so Ultralytics' DDP launcher can cloudpickle them by reference
into each rank; each process creates its own Session lazily from YOLODOCTOR_RUN_DIR on the first callback (no
thread, file or NVML handle crosses a process boundary). A failure inside a hook is recorded and never breaks the
user's training.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from yolodoctor.profiling.recorder import EVENTS

if TYPE_CHECKING:
    from yolodoctor.profiling.session import Session

_session: Session | None = None
_error: list[str] = []


def session() -> Session:
    global _session
    if _session is None:
        from yolodoctor.profiling import signals
        from yolodoctor.profiling.session import ENV_RUN_DIR, Session

        _session = Session(os.environ[ENV_RUN_DIR])
        import signal

        if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
            signals.install()
        _chain_excepthook()
        atexit.register(_at_exit)
    return _session


def _chain_excepthook() -> None:
    previous = sys.excepthook

    def hook(tp: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        from yolodoctor.profiling.session import classify_error

        _error.append(classify_error(value)[0])
        previous(tp, value, tb)

    sys.excepthook = hook


def _at_exit() -> None:
    if _session is not None:
        _session.end("incomplete" if _error else "complete", _error[0] if _error else None)


def _forward(name: str) -> Callable[[Any], None]:
    def callback(trainer: Any) -> None:
        try:
            getattr(session().recorder, name)(trainer)
        except Exception as e:
            with contextlib.suppress(Exception):
                session().events.write("hook_error", hook=name, error=f"{type(e).__name__}: {e}"[:300])

    callback.__name__ = callback.__qualname__ = name
    return callback


for _name in EVENTS:
    globals()[_name] = _forward(_name)


def register(callbacks_base_module: Any) -> None:
    """Append the hooks to Ultralytics' default callbacks (copied into every trainer, custom subclasses too)."""
    for name in EVENTS:
        fn = globals()[name]
        lst = callbacks_base_module.default_callbacks.setdefault(name, [])
        if fn not in lst:
            lst.append(fn)


def patch_trainer(trainer_module: Any) -> None:
    """Merge the run's overrides (spec.json "overrides", from `fix --apply` or a trial) into the arguments of every
    trainer the program builds, custom subclasses included (they all pass through BaseTrainer.__init__), and set
    the run's torch flags. Nothing to do - and nothing patched - when the run asks for none."""
    import json

    from yolodoctor.profiling.session import ENV_RUN_DIR

    spec = json.loads((Path(os.environ[ENV_RUN_DIR]) / "spec.json").read_text())
    if spec.get("ddp") and os.environ.get("RANK") is None:
        return  # `profile device=0,1`'s launcher: it trains nothing and applied the run's flags itself (child.py)
    if spec.get("ddp"):  # a rank of `profile device=0,1`: as in yolodoctor's own training process, no downloads
        from yolodoctor.profiling.child import no_dataset_downloads

        no_dataset_downloads()
    plan, flags = dict(spec.get("overrides") or {}), dict(spec.get("torch_flags") or {})
    base = getattr(trainer_module, "BaseTrainer", None)
    if base is None or (not plan and not flags) or getattr(base.__init__, "_yolodoctor", False):
        return
    original = base.__init__

    def __init__(self: Any, cfg: Any = trainer_module.DEFAULT_CFG, overrides: dict[str, Any] | None = None,
                 _callbacks: Any = None) -> None:
        if flags:
            from yolodoctor.profiling.child import apply_torch_flags

            apply_torch_flags(flags)
        session().events.write("overrides", applied=plan, torch_flags=flags, trainer=type(self).__name__)
        original(self, cfg, {**(overrides or {}), **plan}, _callbacks)

    __init__.__dict__["_yolodoctor"] = True  # what the check above reads: patched once
    base.__init__ = __init__
