"""SIGTERM as an exception in the main thread, so a terminated training ends through the same path as Ctrl-C."""

from __future__ import annotations

import signal


class Terminated(BaseException):
    pass


def _raise(signum, frame):
    raise Terminated()


def install() -> None:
    signal.signal(signal.SIGTERM, _raise)
