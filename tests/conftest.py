import fcntl
import os
import sys
from pathlib import Path

import pytest

# Ultralytics must never wait on the network in tests; keep its logs quiet.
os.environ["YOLO_OFFLINE"] = "1"
os.environ.setdefault("YOLO_VERBOSE", "False")
sys.path.insert(0, str(Path(__file__).parent))  # tests/fakes.py

_held = None  # the lock files a run of consecutive timed tests keeps between them


def _timed(item) -> bool:
    return item is not None and item.get_closest_marker("timed") is not None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Under pytest-xdist (`-n 2`), a test marked `timed` runs with no other test beside it, setup and teardown
    included: it judges measured speeds (a trial's gain against the machine's noise, a steady window's halves), and a
    training on the other worker would be part of what it measures. Every other test holds a shared lock, a timed one
    the exclusive one, kept through the timed tests that follow it on its worker (xdist_group "timed" puts them
    there); a turnstile in front lets a waiting timed test in before the next shared holder."""
    global _held
    if "PYTEST_XDIST_WORKER" not in os.environ or not item.config.option.basetemp:
        yield  # one process: nothing runs beside a test
        return
    timed = _timed(item)
    held = _held
    if held is None:
        root = Path(item.config.option.basetemp).parent  # the run's folder, above each worker's own
        held = open(root / "turnstile.lock", "a"), open(root / "timed.lock", "a")  # noqa: SIM115 (held across tests)
        gate, lock = held
        fcntl.flock(gate, fcntl.LOCK_EX)
        fcntl.flock(lock, fcntl.LOCK_EX if timed else fcntl.LOCK_SH)
        if not timed:
            fcntl.flock(gate, fcntl.LOCK_UN)
    try:
        yield
    finally:
        if timed and _timed(nextitem):
            _held = held
        else:
            _held = None
            gate, lock = held
            fcntl.flock(lock, fcntl.LOCK_UN)
            if timed:
                fcntl.flock(gate, fcntl.LOCK_UN)
            gate.close()
            lock.close()
