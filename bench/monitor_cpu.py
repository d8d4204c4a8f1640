"""The monitor's own CPU cost: CPU time of the `yolodoctor monitor` process over wall time, while it tails a run.

    .venv/bin/python bench/monitor_cpu.py [--seconds 20] [--refresh 1] [--warmup 5] [--fixture h200-defaults] [--out F]
    .venv/bin/python bench/monitor_cpu.py --live model=yolo11n.yaml data=DS/data.yaml imgsz=128 batch=8 workers=0

Replay (default): a recorded H200 run (fixtures/profiles/NAME) is appended to a fresh run directory in real time,
from a few seconds before its first step, by this process; `yolodoctor monitor RUN_DIR --refresh S` runs in a
pseudo-terminal of 120x40 (its output read and discarded here), so it does all it does in a real terminal: tail,
facts and rules, rendering, writing escape codes. --live instead starts `yolodoctor monitor KEY=VALUE ...`, which
launches a real training; only the monitor process is counted, not the training it started (a child).
CPU is read from /proc (psutil) at the end of --warmup and --seconds later; goal: below 5% of one core.
The result, with the machine and the date, is printed and written as JSON to --out (by default
bench/results/monitor-cpu-DATE.json; --out - prints only); BENCHMARKS.md's figure is read from that file.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import fcntl
import json
import os
import pty
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import describe_machine

from yolodoctor.record.events import read_events

ROOT = Path(__file__).resolve().parents[1]


def replay_into(src: Path, run: Path, stop: threading.Event, lead_s: float = 3.0) -> None:
    """Append src's events and samples to run/ on the wall clock, starting lead_s before the first step."""
    for name in ("spec.json", "roles.json"):
        if (src / name).exists():
            shutil.copy(src / name, run / name)
    prof = json.loads((src / "profile.json").read_text())
    (run / "profile.json").write_text(json.dumps({**prof, "status": "running", "reason": None, "summary": {}}))
    recs = sorted([("events.jsonl", r) for r in read_events(src / "events.jsonl")]
                  + [("samples.jsonl", r) for r in read_events(src / "samples.jsonl")], key=lambda x: x[1]["t"])
    first_step = next(r["t"] for _, r in recs if r["type"] == "step")
    t0, w0 = first_step - lead_s, time.monotonic()
    with contextlib.ExitStack() as stack:
        files = {n: stack.enter_context(open(run / n, "a", buffering=1)) for n in ("events.jsonl", "samples.jsonl")}
        for name, rec in recs:
            if rec["type"] not in ("sampler_start", "settings", "run_start", "train_begin") and rec["t"] < t0:
                continue
            delay = (rec["t"] - t0) - (time.monotonic() - w0)
            if delay > 0 and stop.wait(delay):
                break
            files[name].write(json.dumps(rec) + "\n")


def spawn_in_pty(argv: list[str], cols: int = 120, rows: int = 40) -> tuple[subprocess.Popen, int]:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = dict(os.environ, TERM="xterm-256color", COLUMNS=str(cols), LINES=str(rows))
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True, cwd=ROOT)
    os.close(slave)
    return proc, master


def drain(master: int, stop: threading.Event) -> None:
    while not stop.is_set():
        r, _, _ = select.select([master], [], [], 0.2)
        if r:
            try:
                if not os.read(master, 65536):
                    return
            except OSError:
                return


def cpu_s(p: psutil.Process) -> float:
    t = p.cpu_times()
    return t.user + t.system


def main() -> int:
    argv = sys.argv[1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--warmup", type=float, default=5.0, help="not counted: start-up (imports, first render)")
    ap.add_argument("--refresh", type=float, default=1.0)
    ap.add_argument("--fixture", default="h200-defaults")
    ap.add_argument("--live", action="store_true", help="launch a training (KEY=VALUE) instead of a replay")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / f"monitor-cpu-{dt.date.today()}.json"),
                    help="the results JSON (default bench/results/monitor-cpu-DATE.json; - prints only)")
    ap.add_argument("train_args", nargs="*", metavar="KEY=VALUE")
    a = ap.parse_args(argv)
    started = dt.datetime.now().astimezone()
    load_start = [round(x, 2) for x in os.getloadavg()]
    stop = threading.Event()
    tmp = Path(tempfile.mkdtemp(prefix="yd-monitor-cpu-"))
    run = tmp / "run"
    yd = [sys.executable, "-m", "yolodoctor", "monitor", "--refresh", str(a.refresh)]
    if a.live:
        os.environ.setdefault("YOLO_OFFLINE", "1")
        argv_mon = [*yd, "--out", str(run), *a.train_args]
    else:
        run.mkdir()
        threading.Thread(target=replay_into, args=(ROOT / "fixtures/profiles" / a.fixture, run, stop),
                         daemon=True).start()
        argv_mon = [*yd, str(run)]
    proc, master = spawn_in_pty(argv_mon)
    threading.Thread(target=drain, args=(master, stop), daemon=True).start()
    mon = psutil.Process(proc.pid)
    try:
        time.sleep(a.warmup)
        if proc.poll() is not None:
            raise SystemExit(f"the monitor exited early with code {proc.returncode}")
        c0, w0 = cpu_s(mon), time.monotonic()
        time.sleep(a.seconds)
        c1, w1 = cpu_s(mon), time.monotonic()
        startup = c0
    finally:
        if proc.poll() is None:
            os.write(master, b"q")  # quit as a user would (a launched training is stopped by the monitor)
            try:
                proc.wait(90)
            except subprocess.TimeoutExpired:
                proc.kill()
        stop.set()
        shutil.rmtree(tmp, ignore_errors=True)
    result = {"mode": "live" if a.live else f"replay of {a.fixture}", "refresh_s": a.refresh,
              "seconds": round(w1 - w0, 2), "cpu_s": round(c1 - c0, 3),
              "cpu_pct_of_one_core": round(100.0 * (c1 - c0) / (w1 - w0), 2), "startup_cpu_s": round(startup, 2),
              "goal_pct": 5.0, "monitor_exit_code": proc.returncode}
    result = {"benchmark": "monitor-cpu", "date": started.date().isoformat(), "started": started.isoformat(),
              "machine": describe_machine(), "command": " ".join(["bench/monitor_cpu.py", *argv]),
              "load_average_at_start": load_start, "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
              **result}
    print(json.dumps(result, indent=2))
    if a.out != "-":
        out = Path(a.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"written: {out}", file=sys.stderr)
    return 0 if result["cpu_pct_of_one_core"] < 5.0 else 1


if __name__ == "__main__":
    sys.exit(main())
