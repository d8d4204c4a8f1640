"""How a steady rate measured over a short window varies within one run, by window length.

    python bench/window_noise.py RUN_DIR_OR_FOLDER ... [--seconds 1 2 4 8 16]

For every run directory found (a folder holding events.jsonl or events.jsonl.gz), the steady steps (after SETTLE +
the prefetch queue, trace steps left out: profiling/bounds.py) are cut into consecutive windows of each length, and
the rate of each window (images / (wait + compute)) is compared with the run's own steady rate. A fix --verify trial
measures one window of 2 x workers x 4 steps (4-8 s on the H200); if the within-run spread at that length is of the
order of the gains the trials must tell apart, the window is too short, and a longer one is worth its cost. A spread
that does not narrow with longer windows is drift (the host changing speed for longer than a window), which only
repeats spread over time answer (fix --verify --max-reps).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from yolodoctor.record import bounds
from yolodoctor.record.events import read_events
from yolodoctor.record.summary import depth_of, settings_of, steps_of

SECONDS = (1.0, 2.0, 4.0, 8.0, 16.0)


def steady_steps(run: Path) -> list[dict]:
    events = list(read_events(run / "events.jsonl"))
    steps = [s for s in steps_of(events) if s.get("train_index", 0) == 0]
    return bounds.window(steps, depth_of(settings_of(events)))["records"]  # training steps only, as profile.json


def windows(steps: list[dict], seconds: float) -> list[float]:
    """Rates of consecutive windows of at least ``seconds`` of step time (the last, shorter one dropped)."""
    out, imgs, t = [], 0, 0.0
    for s in steps:
        imgs += s["images"]
        t += (s.get("wait") or 0) + s["compute"]
        if t >= seconds:
            out.append(imgs / t)
            imgs, t = 0, 0.0
    return out


def analyse(run: Path, lengths=SECONDS) -> dict:
    steps = steady_steps(run)
    total = sum((s.get("wait") or 0) + s["compute"] for s in steps)
    rate = sum(s["images"] for s in steps) / total if total else None
    rows = {}
    for w in lengths:
        rs = windows(steps, w)
        if len(rs) >= 2 and rate:
            rows[w] = {"n": len(rs), "cv": statistics.pstdev(rs) / statistics.mean(rs),
                       "range": (max(rs) - min(rs)) / rate}
    compute = sorted(s["compute"] for s in steps)
    # the step's own time, data wait left out: p10, median, p90 (how much a single step jitters)
    spread = ([statistics.quantiles(compute, n=10, method="inclusive")[i] for i in (0, 4, 8)]
              if len(compute) >= 2 else None)
    return {"run": str(run), "steps": len(steps), "seconds": total, "rate": rate, "compute_s": spread,
            "by_window": rows}


def runs_under(paths: list[Path]) -> list[Path]:
    found = []
    for p in paths:
        for ev in sorted([*p.rglob("events.jsonl"), *p.rglob("events.jsonl.gz")]):
            if ev.parent not in found and (ev.name == "events.jsonl" or not (ev.parent / "events.jsonl").exists()):
                found.append(ev.parent)
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--seconds", nargs="+", type=float, default=list(SECONDS))
    a = ap.parse_args(argv)
    runs = runs_under(a.paths)
    if not runs:
        print(f"no run directory (events.jsonl) under {', '.join(map(str, a.paths))}", file=sys.stderr)
        return 2
    print("| run | steady steps | steady s | img/s | step compute p10/p50/p90 ms | "
          + " | ".join(f"{w:g} s: windows, cv, range" for w in a.seconds) + " |")
    print("|---|---|---|---|---|" + "---|" * len(a.seconds))
    for run in runs:
        r = analyse(run, a.seconds)
        cells = [f"{x['n']}, {x['cv']:.1%}, {x['range']:.0%}" if (x := r["by_window"].get(w)) else "-"
                 for w in a.seconds]
        rate = f"{r['rate']:.0f}" if r["rate"] else "-"
        step = "/".join(f"{x * 1e3:.0f}" for x in r["compute_s"]) if r["compute_s"] else "-"
        print(f"| {run} | {r['steps']} | {r['seconds']:.1f} | {rate} | {step} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
