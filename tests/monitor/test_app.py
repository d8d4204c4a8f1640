"""The Textual app driven headless (App.run_test + Pilot) over a recorded H200 run replayed progressively."""

from __future__ import annotations

import asyncio
import gzip
import json
import sys
from pathlib import Path

import psutil
import yaml
from fakes import FakeNvmlLib
from textual.widgets import DataTable, Digits, Markdown

from yolodoctor.api.nvml import Nvml
from yolodoctor.diagnosis import facts as facts_mod
from yolodoctor.monitor.app import MonitorApp
from yolodoctor.monitor.launch import Launch
from yolodoctor.monitor.panels import FindingScreen
from yolodoctor.monitor.source import MachineSource, ReplaySource, RunDirSource

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS = ROOT / "fixtures" / "profiles" / "h200-defaults"


def text(app, selector: str) -> str:
    return str(app.query_one(selector).render())


def table_ids(app) -> list[str]:
    return [k.value for k in app.query_one(DataTable).rows]


def test_panels_show_the_recorded_values(rules, recorded, first_step, wait_for, tmp_path):
    events, samples, t0 = recorded("h200-defaults")
    polls = first_step("h200-defaults") + 5  # mid-run: one recorded second per poll
    until = t0 + polls
    sample = [s for s in samples if s["type"] == "sample" and s["t"] <= until][-1]
    step = [e for e in events if e["type"] == "step" and e["t"] <= until][-1]
    g, start = sample["gpu"], samples[0]["gpu"]
    for name, recs in (("events.jsonl", events), ("samples.jsonl", samples)):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in recs if r["t"] <= until))
    rate = facts_mod.live(tmp_path)["run.images_per_s"]  # the rolling window's rate, from the files

    async def main():
        app = MonitorApp(ReplaySource(DEFAULTS, rules=rules, hold=polls), refresh=0.01)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.snapshot and app.snapshot.seq == polls)
            assert app.query_one("#gpu-util-digits", Digits).value == f"{g['util']:.0f}%"
            assert text(app, "#gpu-util .value") == f"util  {g['util']:.0f}%"
            assert text(app, "#gpu-mem .value") == f"mem   {g['mem_used'] / 2**30:.1f}/{g['mem_total'] / 2**30:.1f} GiB"
            assert text(app, "#gpu-power .value") == f"power {g['power_w']:.0f}/{start['power_limit_w']:.0f} W"
            assert app.query_one("#gpu").border_title == f"GPU 0 · {start['name']}"
            assert app.query_one("#cpu").border_title == f"CPU · {sample['cpu']['count']} cores"
            assert text(app, "#cpu-total .value").startswith(f"total {sample['cpu']['total']:.0f}%")
            w = sample["roles"]["train_worker"]
            assert text(app, "#cpu-workers .value") == (f"workers {w['count']}×{w['cpu'] / w['count']:.0f}% = "
                                                        f"{w['cpu']:.0f}%")
            assert app.query_one("#training").border_title == (f"Training · epoch {step['epoch'] + 1}/20 · "
                                                               f"batch {step['i'] + 1}/500")
            assert text(app, "#train-loss") == f"loss {step['loss']:.4g}"
            assert text(app, "#train-rate .value") == f"img/s {rate:.0f}"
            assert "batch 16 · workers 8" in text(app, "#info-text") and "fp16" in text(app, "#info-text")
            assert "live" in text(app, "#status")

    asyncio.run(main())


def test_a_finding_appears_and_clears_in_the_table(rules, wait_for):
    probe, shown = ReplaySource(DEFAULTS, rules=rules), []
    while (snap := probe.poll()) is not None and not snap.final:
        shown.append("RN201" in {f.id for f in snap.findings})
    k_on = shown.index(True) + 1  # polls are counted from 1
    k_off = shown.index(False, k_on) + 1

    async def main():
        src = ReplaySource(DEFAULTS, rules=rules, hold=k_on - 1)
        app = MonitorApp(src, refresh=0.01)
        async with app.run_test(size=(120, 40)) as pilot:
            for hold, present in ((k_on - 1, False), (k_on, True), (k_off - 1, True), (k_off, False)):
                src.hold = hold
                await wait_for(pilot, lambda hold=hold: app.snapshot and app.snapshot.seq == hold)
                assert ("RN201" in table_ids(app)) is present, hold

    asyncio.run(main())


def test_keys_quit_pause_toggle_and_open_a_findings_documentation(rules, first_step, wait_for):
    doc = yaml.safe_load(next((ROOT / "rules").glob("CF201-*.yaml")).read_text())["docs"]
    polls = first_step("h200-defaults") + 5

    async def main():
        src = ReplaySource(DEFAULTS, rules=rules, hold=polls)
        app = MonitorApp(src, refresh=0.01)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.snapshot and app.snapshot.seq == polls)
            # pause: no polling while paused, the status says so; p again resumes
            await pilot.press("p")
            src.hold = None
            await pilot.pause(0.3)
            assert src.polls == polls and "paused" in text(app, "#status")
            await pilot.press("p")
            await wait_for(pilot, lambda: src.polls > polls + 1)
            await pilot.press("p")  # hold still for what follows
            # toggles: a panel hides and comes back
            await pilot.press("g")
            assert not app.query_one("#gpu").display
            await pilot.press("g")
            assert app.query_one("#gpu").display
            # enter on a row opens its rule's documentation and the evidence; escape closes it
            table = app.query_one(DataTable)
            table.move_cursor(row=table.get_row_index("CF201"))
            await pilot.press("enter")
            assert isinstance(app.screen, FindingScreen) and app.screen.finding.id == "CF201"
            md = app.screen.query_one(Markdown)
            source = md.source if hasattr(md, "source") else md._markdown
            assert " ".join(doc["what"].split()) in " ".join(source.split())
            assert "settings.deterministic" in source and "## Why it matters" in source
            await pilot.press("escape")
            assert not isinstance(app.screen, FindingScreen)
            await pilot.press("d")
            assert isinstance(app.screen, FindingScreen)
            await pilot.press("q")  # in the documentation q closes it ...
            assert not isinstance(app.screen, FindingScreen) and app.is_running
            await pilot.press("q")  # ... and on the main screen quits
            await pilot.pause()
            assert not app.is_running

    asyncio.run(main())


def test_survives_without_nvml(rules, first_step, wait_for, copy_run):
    nvml = Nvml.open(FakeNvmlLib([], init_error="NVML Shared Library Not Found"))

    async def machine():
        app = MonitorApp(MachineSource(nvml=nvml), refresh=0.01)
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: app.snapshot and app.snapshot.seq >= 3)
            assert "N/A: NVML unavailable" in app.query_one("#gpu").border_subtitle
            assert app.query_one("#gpu-util-digits", Digits).value == "-"
            assert text(app, "#gpu-mem .value") == "mem   N/A"
            assert app.query_one("#cpu").border_title == f"CPU · {psutil.cpu_count()} cores"
            assert "settings: N/A" in text(app, "#info-text") and table_ids(app) == []

    asyncio.run(machine())
    # a run recorded without NVML: its sampler_start says why, its samples have no GPU section
    run = copy_run("h200-workers0", dest="nogpu")
    lines = gzip.decompress((run / "samples.jsonl.gz").read_bytes()).decode().splitlines()
    recs = [json.loads(x) for x in lines]
    for r in recs:
        if r["type"] == "sampler_start":
            r["gpu"], r["gpu_unavailable"] = None, "NVML unavailable: Driver Not Loaded"
        elif r["type"] == "sample":
            r["gpu"] = None
    (run / "samples.jsonl.gz").unlink()
    (run / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))

    async def recorded_run():
        polls = first_step("h200-workers0") + 3
        app = MonitorApp(ReplaySource(run, rules=rules, hold=polls), refresh=0.01)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.snapshot and app.snapshot.seq == polls)
            assert app.query_one("#gpu").border_subtitle == "N/A: NVML unavailable: Driver Not Loaded"
            assert text(app, "#gpu-power .value") == "power N/A"
            assert app.query_one("#training").border_title.startswith("Training · epoch 1/")  # the rest goes on

    asyncio.run(recorded_run())


def test_the_ended_state_says_how_the_run_ended(rules, wait_for, copy_run):
    reason = "crashed: IndexError: index [3] is out of bounds for [b] dimension"  # not markup
    run = copy_run("h200-workers0", status="incomplete", reason=reason, exit_code=1)

    async def main():
        app = MonitorApp(ReplaySource(run, rules=rules, speed=5.0), refresh=0.01)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.snapshot and app.snapshot.ended)
            status = text(app, "#status")
            assert f"training ended: incomplete - {reason}" in status and "exit code 1" in status
            assert app.query_one("#findings").border_title == "Final diagnosis"
            ids = table_ids(app)
            assert ids[0] == "ST204" and "DL201" in ids  # how it ended, then the recording's diagnosis
            assert reason in str(app.query_one(DataTable).get_row("ST204")[3])
            seq = app.snapshot.seq
            await pilot.pause(0.2)
            assert app.snapshot.seq == seq and app.is_running  # the final state stays until q

    asyncio.run(main())


def test_a_launched_command_is_monitored_until_it_ends(rules, wait_for, tmp_path):
    """`monitor -- COMMAND` end to end: profile starts the program, which trains nothing; the monitor says so."""
    run = tmp_path / "run"
    command = [sys.executable, "-c", "print('no training here')"]
    launch = Launch(run, [], command, ["--all", "--no-trace", "--loader-seconds", "0"])
    assert launch.argv == [sys.executable, "-m", "yolodoctor", "profile", "--all", "--no-trace", "--loader-seconds",
                           "0", "--out", str(run), "--", *command]
    launch.start()

    async def main():
        app = MonitorApp(RunDirSource(run, rules=rules, launch=launch), refresh=0.05)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.snapshot and app.snapshot.ended, timeout=40)
            assert "no Ultralytics training was seen (exit code 0)" in text(app, "#status")

    try:
        asyncio.run(main())
    finally:
        assert launch.stop(finishing=30.0) == 1  # profile's verdict: the training failed (there was none)
    assert launch.log_path.exists()
