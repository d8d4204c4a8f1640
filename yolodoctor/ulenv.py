"""Ultralytics' own log: quiet in yolodoctor's process, as the user has it in the training's.

yolodoctor's commands set ``YOLO_VERBOSE=False`` for their own use of Ultralytics (reading its defaults, checking a
dataset), where Ultralytics' banners would only clutter a report. A training yolodoctor launches must print what
Ultralytics prints to the user (its progress, the corrupt images it drops, its warnings) into the run directory's
output.log, so the child gets the user's own setting back: ``YOLO_VERBOSE`` is left out of its environment where
yolodoctor, not the user, set it.
"""

from __future__ import annotations

import os

MARK = "YOLODOCTOR_SET_YOLO_VERBOSE"  # present where yolodoctor (not the user) set YOLO_VERBOSE


def quiet_ultralytics() -> None:
    """YOLO_VERBOSE=False for this process, unless the user set it."""
    if "YOLO_VERBOSE" not in os.environ:
        os.environ["YOLO_VERBOSE"] = "False"
        os.environ[MARK] = "1"


def users_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a training process: YOLO_VERBOSE as the user had it."""
    if env.pop(MARK, None):
        env.pop("YOLO_VERBOSE", None)
    return env
