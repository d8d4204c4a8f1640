"""Benchmark (GPU): the profiler's overhead on images/s outside its trace window, and the time to a written profile.

    python bench/profiler_overhead.py --data DATA_YAML --out DIR [--reps 3] [--steps 160]
           [--configs plain,full,notrace,traceonly] [KEY=VALUE ...]

Configurations: plain (bench/plain_train.py), full (`yolodoctor profile`), notrace (--no-trace), traceonly
(--sample-hz 0: the trace window without the sampler), nogpu (--no-trace --no-gpu-telemetry), duty (`profile` with
the sampler switched on and off every 3 s: its cost measured inside one run, see duty_effect; use --steps 400).
The recorder's own cost per step is in each profile's summary (recorder_us_per_step).

Runs plain training (bench/plain_train.py: one timestamp per step) and `yolodoctor profile` (recorder, sampler,
trace window on the last 5 steps, no loader timing) interleaved A B A B ..., each bounded to the same number of steps,
and compares images/s over the same steady window (steps 60 to the last 10: past a full queue depth of 8 workers x 4,
before the trace window on the last 5 steps). Writes DIR/overhead.json; prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

FIRST = 60


def rate(ends: list[float], images: list[int], first: int = FIRST, tail: int = 10) -> float:
    """images/s over steps [first, len - tail): the profiler traces its last 5 steps, which are left out for both."""
    last = len(ends) - tail
    return sum(images[first:last]) / (ends[last - 1] - ends[first - 1])


def plain(args, out: Path, words: list[str]) -> float:
    res = out / f"plain-{time.monotonic_ns()}.json"
    subprocess.run([sys.executable, str(Path(__file__).with_name("plain_train.py")), str(res), str(args.steps),
                    f"data={args.data}", *words], check=True, stdout=subprocess.DEVNULL)
    d = json.loads(res.read_text())
    return rate(d["ends"], d["images"])


FLAGS = {"full": [], "notrace": ["--no-trace"], "traceonly": ["--sample-hz", "0"],
         "nogpu": ["--no-trace", "--no-gpu-telemetry"], "duty": []}
DUTY = "3,3"  # the `duty` config: the sampler samples 3 s, pauses 3 s, ... within one profiled run


def duty_effect(run: Path, first: int = FIRST, tail: int = 10) -> dict:
    """Within one run: median step interval while the sampler samples vs while it pauses (steps wholly inside a
    block). The between-run spread of this machine does not enter: the same process, the same minute."""
    events = (run / "events.jsonl").read_text().splitlines()
    samples = (run / "samples.jsonl").read_text().splitlines()
    steps = sorted((e for e in map(json.loads, events) if e.get("type") == "step"), key=lambda e: e["step"])
    switches = [(r["t"], r["type"] == "sampler_resume") for r in map(json.loads, samples)
                if r.get("type") in ("sampler_pause", "sampler_resume")]
    start = next(json.loads(line)["t"] for line in samples)

    def state(t0: float, t1: float) -> bool | None:
        edges = [start] + [t for t, _ in switches]
        states = [True] + [v for _, v in switches]
        for i, edge in enumerate(edges):
            nxt = edges[i + 1] if i + 1 < len(edges) else float("inf")
            if edge <= t0 and t1 <= nxt:
                return states[i]
        return None  # spans a switch

    on, off = [], []
    for a, b in zip(steps[first - 1:len(steps) - tail - 1], steps[first:len(steps) - tail], strict=False):
        st = state(a["t1"], b["t1"])
        if st is not None:
            (on if st else off).append(b["t1"] - a["t1"])
    return {"steps_on": len(on), "steps_off": len(off),
            "median_on_ms": 1000 * statistics.median(on) if on else None,
            "median_off_ms": 1000 * statistics.median(off) if off else None,
            "on_over_off": statistics.median(on) / statistics.median(off) if on and off else None}


def profiled(args, out: Path, words: list[str], config: str = "full") -> tuple[float, float, dict | None]:
    run = out / f"prof-{config}-{time.monotonic_ns()}"
    t = time.monotonic()
    seam = {"BENCH_SAMPLER_DUTY": DUTY, "PYTHONPATH": os.pathsep.join(  # bench/seams/sitecustomize.py
        [str(Path(__file__).resolve().parent / "seams"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    env = {**os.environ, **(seam if config == "duty" else {})}
    subprocess.run([sys.executable, "-m", "yolodoctor", "profile", f"data={args.data}", *words, "--steps",
                    str(args.steps), "--loader-seconds", "0", *FLAGS[config], "--out", str(run)], check=True,
                   stdout=subprocess.DEVNULL, env=env)
    eff = duty_effect(run) if config == "duty" else None
    if eff:
        print(f"  duty: sampled {eff['median_on_ms']} ms/step ({eff['steps_on']} steps), paused "
              f"{eff['median_off_ms']} ms/step ({eff['steps_off']}): ratio {eff['on_over_off']}", file=sys.stderr)
    wall = time.monotonic() - t
    steps = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    steps = [s for s in steps if s.get("type") == "step"]
    steps.sort(key=lambda s: s["step"])
    return rate([s["t1"] for s in steps], [s["images"] for s in steps]), wall, eff


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--steps", type=int, default=160)
    ap.add_argument("--configs", default="plain,full")
    ap.add_argument("words", nargs="*")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    words = a.words or ["model=yolo11n.yaml", "imgsz=640", "epochs=20", "plots=False", f"project={a.out / 'ul'}"]
    configs = a.configs.split(",")
    rates: dict[str, list[float]] = {c: [] for c in configs}
    rows = []
    for i in range(a.reps):
        for c in configs:  # interleaved: plain full ... plain full ...
            r, wall, eff = (plain(a, a.out, words), None, None) if c == "plain" else profiled(a, a.out, words, c)
            rates[c].append(r)
            rows.append({"rep": i, "config": c, "images_per_s": r, "profile_wall_s": wall, "duty": eff})
            print(f"rep {i} {c}: {r:.1f} img/s", file=sys.stderr)
    base = statistics.median(rates["plain"]) if rates.get("plain") else None
    summary = {c: {"median": statistics.median(v), "min": min(v), "max": max(v),
                   "ratio_to_plain": statistics.median(v) / base if base else None} for c, v in rates.items()}
    for c, v in summary.items():
        print(f"{c:10s} median {v['median']:.1f} img/s  range {v['min']:.1f}-{v['max']:.1f}  ratio "
              f"{v['ratio_to_plain'] or 0:.3f}", file=sys.stderr)
    plains = rates.get("plain") or [1.0]
    res = {"rows": rows, "summary": summary, "plain_spread": (max(plains) - min(plains)) / statistics.median(plains),
           "words": words, "steps": a.steps, "first_step": FIRST, "env": {k: os.environ.get(k) for k in
                                                                          ("CUDA_VISIBLE_DEVICES", "YOLO_OFFLINE")}}
    (a.out / "overhead.json").write_text(json.dumps(res, indent=2))
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
