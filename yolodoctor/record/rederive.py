"""A run record's summary derived again from its own event streams, with the current rules of what is steady.

The event streams hold every step and every sample; ``profile.json``'s summary is what was derived from them when
the run ended. ``resummarise`` derives it again: the runner calls it when a run ends, and ``diagnose`` calls it for a
record written before windows stated their spans (whose steady figures may cross a pause), so that every figure it
reports is taken over the training's own steps. What only the run's end could know stays as recorded: whether the
run was bounded, and its wall-time phases (to which the split of the steps' phase into training and pauses is added).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from yolodoctor.record import ranks
from yolodoctor.record.events import read_events
from yolodoctor.record.profile import EVENTS, SAMPLES
from yolodoctor.record.summary import summarise


def stale(summary: dict[str, Any]) -> bool:
    """The summary was derived before windows stated the spans of their training steps."""
    w = summary.get("window")
    return isinstance(w, dict) and "spans" not in w


def resummarise(run: str | Path, summary: dict[str, Any], events: list[dict] | None = None,
                others: dict[int, list[dict]] | None = None) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
    """(summary, ranks) derived from the run directory's streams (``events``: rank 0's or a single process's, already
    read; ``others``: the other DDP ranks' streams, already read). ``summary``: the record's current summary, whose
    ``bounded`` and ``phases`` are kept."""
    run = Path(run)
    events = events if events is not None else list(read_events(run / EVENTS))
    new = summarise(events)
    for key in ("bounded", "phases"):
        if key in summary:
            new[key] = summary[key]
    if isinstance(new.get("phases"), dict):
        new["phases"] = split_phases(new["phases"], new)
    rows = None
    if others is None:
        others = {r: list(read_events(p)) for r, p in ranks.streams(run).items() if r != 0}
    if others:
        rows = ranks.summarise(run, list(read_events(run / SAMPLES)), read={0: events, **others})
        if rows:
            ranks.fold(new, rows)
    return new, rows


def split_phases(ph: dict[str, Any], summary: dict[str, Any]) -> dict[str, Any]:
    """``phases`` with its ``steps`` (first step to last) split into ``training`` (the steps themselves) and
    ``pauses`` (validation, the epochs' ends, checkpoints: the time between stretches of steps)."""
    steps, paused = ph.get("steps"), (summary.get("pauses") or {}).get("seconds")
    if isinstance(steps, (int, float)) and isinstance(paused, (int, float)):
        paused = min(max(paused, 0.0), steps)
        return {**ph, "training": round(steps - paused, 3), "pauses": round(paused, 3)}
    return ph
