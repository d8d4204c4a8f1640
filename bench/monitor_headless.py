"""Launch a training under `yolodoctor monitor` without a terminal, wait, save an SVG screenshot, stop, print JSON.

    python bench/monitor_headless.py --seconds 90 --screenshot out.svg KEY=VALUE ...   # a training via `profile`
    python bench/monitor_headless.py --seconds 60 --screenshot out.svg -- python train.py
    python bench/monitor_headless.py --until-end --seconds 300 ...  # stop waiting as soon as the training has ended

It runs the real app (MonitorApp over RunDirSource) under Textual's headless test driver (`App.run_test`) at
--size; the training is `python -m yolodoctor profile --all|--steps N --out DIR ...` exactly as the monitor command
starts it. After the screenshot the training is stopped like a quit of the monitor would (Ctrl-C: the record is
saved, marked interrupted) unless it had already ended. YOLO_OFFLINE=1 unless set. Run from the repository root.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from yolodoctor.diagnosis.rules import load_rules
from yolodoctor.monitor.app import MonitorApp
from yolodoctor.monitor.launch import Launch, fresh_run_dir
from yolodoctor.monitor.source import RunDirSource


async def watch(app: MonitorApp, size: tuple[int, int], seconds: float, until_end: bool, shot: Path) -> None:
    async with app.run_test(size=size) as pilot:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            await pilot.pause(0.5)
            if until_end and app.snapshot is not None and app.snapshot.ended:
                await pilot.pause(0.5)
                break
        app.save_screenshot(shot.name, str(shot.parent))


def main() -> int:
    argv = sys.argv[1:]
    command = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="how long to watch (at most, with --until-end)")
    ap.add_argument("--until-end", action="store_true", help="take the screenshot as soon as the training ended")
    ap.add_argument("--screenshot", type=Path, default=Path("monitor.svg"))
    ap.add_argument("--size", default="120x40", help="terminal WIDTHxHEIGHT")
    ap.add_argument("--refresh", type=float, default=1.0)
    ap.add_argument("--steps", type=int, default=None, help="bound the training (default: the whole run)")
    ap.add_argument("--out", type=Path, default=None, help="run directory (must not exist)")
    ap.add_argument("train_args", nargs="*", metavar="KEY=VALUE")
    a = ap.parse_args(argv)
    if not a.train_args and not command:
        ap.error("give KEY=VALUE train arguments or -- COMMAND")
    os.environ.setdefault("YOLO_OFFLINE", "1")
    w, h = (int(x) for x in a.size.lower().split("x"))
    run_dir = fresh_run_dir(a.out)
    launch = Launch(run_dir, a.train_args, command, ["--steps", str(a.steps)] if a.steps else ["--all"]).start()
    app = MonitorApp(RunDirSource(run_dir, rules=load_rules(), launch=launch), refresh=a.refresh)
    t0 = time.monotonic()
    try:
        asyncio.run(watch(app, (w, h), a.seconds, a.until_end, a.screenshot.resolve()))
    finally:
        snap = app.snapshot
        rc = launch.stop(finishing=30.0 if snap and snap.ended else 0.0)
    print(json.dumps({
        "run_dir": str(run_dir), "log": str(launch.log_path), "screenshot": str(a.screenshot),
        "watched_s": round(time.monotonic() - t0, 1), "profile_exit_code": rc,
        "ended": snap.ended.text() if snap and snap.ended else None,
        "steps_seen": snap.train.get("step") if snap else None,
        "images_per_s": snap.train.get("images_per_s") if snap else None,
        "gpu": ((snap.start or {}).get("gpu") or {}).get("name") if snap else None,
        "gpu_missing": snap.gpu_missing if snap else None,
        "findings": [f.id for f in snap.findings] if snap else [],
    }, indent=2))
    return 0 if snap is not None else 1


if __name__ == "__main__":
    sys.exit(main())
