"""A train() call's steps cut at its pauses: the stretches of training, and the pauses between them.

A step's record spans its data wait and its compute: from ``t0 - wait`` (the previous step's end, or the epoch's
start for an epoch's first step) to ``t1``. Between two consecutive steps of one epoch the only time that belongs to
no step is the recorder's own bookkeeping (well under a millisecond). Anything longer is a pause that is not the
training's: the epoch's end, validation, checkpointing, a new epoch's set-up (mosaic closing resets the loader).
A figure taken over wall time across such a pause measures the pause, so rates and sampled figures are taken over
the stretches only (record/bounds.py, diagnosis/facts.py), and the pauses are facts of their own.

Stretches end where the epoch or the train() call changes, and where the gap between two steps is longer than
``limit`` (max(PAUSE_MIN_S, PAUSE_STEPS x the median step)): one epoch's pause can be short (val=False) and a pause
inside an epoch (a user callback that saves something every N steps) is cut as well.
"""

from __future__ import annotations

import itertools
import statistics
from typing import Any

PAUSE_MIN_S = 0.5
PAUSE_STEPS = 3.0  # a gap longer than this many median steps is a pause (and never below PAUSE_MIN_S)


def _f(x: Any) -> float:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else 0.0


def began(step: dict[str, Any]) -> float:
    """When the step's wait began: the previous step's end (or its epoch's start)."""
    return _f(step.get("t0")) - _f(step.get("wait"))


def duration(step: dict[str, Any]) -> float:
    """The step's own time: its data wait and its compute."""
    return _f(step.get("wait")) + _f(step.get("compute"))


def gap(prev: dict[str, Any], cur: dict[str, Any]) -> float:
    """Seconds between two consecutive steps that belong to neither."""
    return began(cur) - _f(prev.get("t1"))


def limit(steps: list[dict[str, Any]]) -> float:
    """The longest gap that is not a pause: max(PAUSE_MIN_S, PAUSE_STEPS x the median step)."""
    times = [duration(s) for s in steps]
    return max(PAUSE_MIN_S, PAUSE_STEPS * statistics.median(times)) if times else PAUSE_MIN_S


def _same_phase(prev: dict[str, Any], cur: dict[str, Any]) -> bool:
    return prev.get("train_index", 0) == cur.get("train_index", 0) and prev.get("epoch") == cur.get("epoch")


def split(steps: list[dict[str, Any]], pause_s: float | None = None) -> list[list[dict[str, Any]]]:
    """The steps (in order) cut into stretches at every pause, epoch change and train() call change."""
    if not steps:
        return []
    lim = limit(steps) if pause_s is None else pause_s
    out: list[list[dict[str, Any]]] = [[steps[0]]]
    for prev, cur in itertools.pairwise(steps):
        if _same_phase(prev, cur) and gap(prev, cur) <= lim:
            out[-1].append(cur)
        else:
            out.append([cur])
    return out


def span(part: list[dict[str, Any]]) -> tuple[float, float]:
    """The wall-clock span of a stretch: its first step's wait to its last step's end."""
    return began(part[0]), _f(part[-1].get("t1"))


def seconds(parts: list[list[dict[str, Any]]]) -> float:
    """Wall seconds of the stretches together (the pauses between them left out)."""
    return sum(b - a for a, b in (span(p) for p in parts if p))


def pauses(parts: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The pauses between consecutive stretches of one train() call: ``after`` and ``before`` (the steps' ``n``),
    ``seconds``, ``epoch_end`` (the epoch changed across it)."""
    out = []
    for a, b in itertools.pairwise(parts):
        if a[-1].get("train_index", 0) != b[0].get("train_index", 0):
            continue
        out.append({"after": _n(a[-1]), "before": _n(b[0]), "seconds": max(0.0, gap(a[-1], b[0])),
                    "epoch_end": a[-1].get("epoch") != b[0].get("epoch")})
    return out


def _n(s: dict[str, Any]) -> int:
    return int(s.get("n", s.get("step", 0)) or 0)


def inside(t: float, spans: list[tuple[float, float]] | list[list[float]]) -> bool:
    """``t`` falls inside one of the spans."""
    return any(a <= t <= b for a, b in spans)
