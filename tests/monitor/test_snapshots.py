"""Snapshots (pytest-textual-snapshot) of the main screen at 120x40 and 80x24, mid-run of a recorded H200 profile.

Deterministic: the replay is held 5 polls after its first step (recorded data only, no clock text, a fixed label).
After a deliberate change of the layout, or a re-recorded h200-defaults, run
`.venv/bin/python -m pytest tests/monitor/test_snapshots.py --snapshot-update` and review the SVGs in __snapshots__/.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from yolodoctor.monitor.app import MonitorApp
from yolodoctor.monitor.source import ReplaySource

DEFAULTS = Path(__file__).resolve().parents[2] / "fixtures" / "profiles" / "h200-defaults"


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
def test_main_screen(size, snap_compare, rules, first_step):
    polls = first_step("h200-defaults") + 5
    app = MonitorApp(ReplaySource(DEFAULTS, rules=rules, hold=polls, label="h200-defaults (replay)"), refresh=0.01)

    async def held(pilot):
        while not (app.snapshot and app.snapshot.seq == polls):
            await pilot.pause(0.02)
        # Textual's progress bar rounds its percentage to the bar's width when it is set, and the width is 0 until
        # the bar's first layout: polls that come faster than the screen refreshes can all land before it, leaving
        # an unrounded bar (a flaky half cell). Once laid out, the held snapshot is shown again, as on a later poll
        bar = app.query_one("#train-progress Bar")
        while not bar.size.width:
            await pilot.pause(0.02)
        app.query_one("#training").show(app.snapshot)
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=held)
