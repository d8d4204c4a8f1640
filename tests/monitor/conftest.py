"""Shared pieces of the monitor tests: the recorded H200 runs, the rules, and waiting on a headless app."""

from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path

import pytest

from yolodoctor.diagnosis.rules import load_rules
from yolodoctor.record.events import read_events

PROFILES = Path(__file__).resolve().parents[2] / "fixtures" / "profiles"


@pytest.fixture(scope="session")
def rules():
    return load_rules()


@pytest.fixture
def recorded():
    """name -> (events, samples, t0): a recorded run's streams and the time of its first record."""

    def load(name: str):
        events = list(read_events(PROFILES / name / "events.jsonl"))
        samples = list(read_events(PROFILES / name / "samples.jsonl"))
        return events, samples, min(r["t"] for r in events + samples)

    return load


@pytest.fixture
def first_step(recorded):
    """name -> the replay poll (one recorded second each, from 1) that first shows a training step."""

    def poll(name: str) -> int:
        events, _, t0 = recorded(name)
        return math.ceil(next(e["t"] for e in events if e["type"] == "step") - t0)

    return poll


@pytest.fixture
def copy_run(tmp_path):
    """name, **profile_changes -> a copy of a recorded run directory, its profile.json changed as given."""

    def copy(name: str, dest: str | None = None, **changes) -> Path:
        run = tmp_path / (dest or name)
        shutil.copytree(PROFILES / name, run)
        if changes:
            prof = json.loads((run / "profile.json").read_text())
            (run / "profile.json").write_text(json.dumps({**prof, **changes}))
        return run

    return copy


@pytest.fixture
def wait_for():
    """await wait_for(pilot, condition, timeout): let the app run until condition() holds (else fail)."""

    async def wait(pilot, condition, timeout: float = 10.0) -> None:
        end = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > end:
                pytest.fail(f"timed out after {timeout} s waiting for {condition}")
            await pilot.pause(0.02)
        await pilot.pause()  # let the message that made it true reach the widgets

    return wait
