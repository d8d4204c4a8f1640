"""Write the issue-3 GPU figures to BENCHMARKS.md from what bench/gpu_fixtures.sh and bench/profiler_overhead.py left.

    python bench/report_issue3.py --runs DIR_WITH_walls.jsonl [--runs ...] --ablation DIR [--date YYYY-MM-DD]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_section  # noqa: E402


def segment_ms(ends: list[float], every: int = 20, width: int = 10) -> list[float]:
    d = [(b - a) * 1000 for a, b in zip(ends, ends[1:])]
    return [round(statistics.median(d[i:i + width]), 1) for i in range(0, len(d), every)]


def rate(ends: list[float], images: list[int], first: int = 60) -> float:
    return sum(images[first:]) / (ends[-1] - ends[first - 1])


def ablation_rows(root: Path) -> list[str]:
    rows = []
    for f in sorted(root.glob("plain-*.json"), key=lambda p: int(p.stem.split("-")[-1])):
        d = json.loads(f.read_text())
        rows.append(("plain", int(f.stem.split("-")[-1]), rate(d["ends"], d["images"]), segment_ms(d["ends"])))
    for run in root.glob("prof-*"):
        steps = sorted((json.loads(x) for x in open(run / "events.jsonl")), key=lambda e: e.get("step", -1))
        steps = [s for s in steps if s.get("type") == "step"]
        if len(steps) < 61:
            continue
        cfg, ts = run.name.split("-")[1], int(run.name.split("-")[-1])
        ends = [s["t1"] for s in steps]
        rows.append((cfg, ts, rate(ends, [s["images"] for s in steps]), segment_ms(ends)))
    rows.sort(key=lambda r: r[1])  # run order (monotonic start stamps)
    return [f"| {i + 1} | {c} | {r:.1f} | {' '.join(map(str, seg))} |" for i, (c, _, r, seg) in enumerate(rows)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=Path, action="append", required=True)
    ap.add_argument("--ablation", type=Path, required=True)
    ap.add_argument("--date", default="2026-12-02")
    a = ap.parse_args()
    walls = []
    for r in a.runs:
        for line in open(r / "walls.jsonl"):
            w = json.loads(line)
            prof = json.loads((r / w["name"] / "profile.json").read_text())
            walls.append(f"| {w['name']} | {w['wall_s']:.1f} | {prof['summary']['steps']} | "
                         f"{prof['settings'].get('compile_active')} | "
                         f"{(prof.get('loader_capacity') or {}).get('seconds') or 0:.1f} |")
    body = f"""## Profiler on the H200 (issue 3)

Machine: the lent NVIDIA H200 (16 cores, driver 580.159, torch 2.11, CUDA 13, Python 3.12, Ultralytics 8.4.190).
Date: {a.date}. Dataset: `make-dataset --images 8000` (640x480 JPEG). Model yolo11n.yaml, imgsz 640, epochs=20
(mosaic on). Commands: `PART=fixtures bash bench/gpu_fixtures.sh`, `PART=compile bash bench/gpu_fixtures.sh`,
`python bench/profiler_overhead.py --data DATA --out DIR --reps 2 --steps 140 --configs plain,full,notrace,traceonly`,
then `python bench/report_issue3.py --runs ... --ablation DIR`.

### Time from start to a written profile, default `--steps`

| run | wall s | steps | compile active | of which loader timing s |
|---|---|---|---|---|
{chr(10).join(walls)}

The defaults run includes Ultralytics' first scan of the 8,000 labels (it writes labels.cache), the model build, the
bounded steps and 8 s of loader timing. Goal <= 60 s (compile excluded): met by workers0 and fp32, missed by
defaults at 63 s on a fresh dataset (the label scan); the compile run (about 130 s of compilation) is excluded.

### Profiler overhead (what was measured, and what it taught)

Interleaved runs of 140 steps at Ultralytics defaults (batch 16, workers 8); images/s over steps 60-140; the last
column is the median step time (ms) of 10-step slices every 20 steps, which shows *when* a run slowed down.
`full` = recorder + sampler + trace window; `notrace` = without the trace; `traceonly` = trace window, no sampler.
The trace window sat at steps 10-14 in these runs.

| order | config | images/s | median step ms at steps 0, 20, 40, ... |
|---|---|---|---|
{chr(10).join(ablation_rows(a.ablation))}

Finding: runs with a CUDA trace window become about 30% slower *after* the window and stay slower (steps ~70 ms ->
~96 ms), in two of three traced runs; runs without the trace (`notrace`, `plain`) do not. This training is launch
bound (1,870 kernels per step, GPU busy 13%), so any per-launch cost left behind by CUPTI shows directly. The
sampler is not the cause (traceonly has no sampler and slowed most). The profiler now places its trace window on
the **last** steps of the run, after everything it measures. The overhead goal (<= 2% outside the trace window)
is therefore not yet demonstrated on the GPU: the re-measurement with the trace at the end is the first GPU task of
the next session (on the CPU the sampler costs 0.9-1.5% of one core, measured by the sampler itself).
"""
    print(body)
    write_section("profiler-gpu", body)


if __name__ == "__main__":
    main()
