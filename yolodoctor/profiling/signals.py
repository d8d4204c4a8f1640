"""SIGTERM as an exception in the main thread, so a terminated training ends through the same path as Ctrl-C."""

from __future__ import annotations

import signal
from types import FrameType
from typing import NoReturn


class Terminated(BaseException):
    pass


def _raise(signum: int, frame: FrameType | None) -> NoReturn:
    raise Terminated()


def install() -> None:
    signal.signal(signal.SIGTERM, _raise)
