"""The profiler's cost measured inside one run: the sampler switched on and off in alternate blocks, the
recorder's self-timed cost per step, and the allocator-counter reads that dominated it.

    python bench/report_profiler_inrun.py collect OUT.json --runs RUN_DIR... [--recorder-cost FILE.json]
    python bench/report_profiler_inrun.py report RESULTS.json [--date YYYY-MM-DD]

Where the runs come from: `PART=inrun bash bench/gpu_fixtures.sh` (bench/profiler_overhead.py --configs duty: three
`yolodoctor profile` runs of 400 steps, Ultralytics defaults, the sampler sampling 3 s and pausing 3 s in turn) and
`python bench/recorder_cost.py` for the allocator counters.

Why inside one run: between runs on an H200 machine the images/s of plain training alone spread 20-40% (BENCHMARKS.md),
so a 2% effect cannot be read from run-to-run comparisons. Here every step interval past the prefetch fill (steps 60 to
the last 10) that lies wholly inside a block is labelled by the sampler's state; each block is summarised by its
median step interval, and the effect is the ratio of the median "on" block to the median "off" block over all runs.
Its 95% interval comes from resampling blocks (with replacement, within state and run, 10,000 draws, seeded); the
noise floor from permuting the on/off labels of the blocks within each run (what the ratio looks like when the
sampler makes no difference).
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_report

FIRST, TAIL = 60, 10


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in open(path) if line.strip()]


def collect(a) -> None:
    runs = []
    for run in a.runs:
        steps = sorted((e for e in _records(run / "events.jsonl") if e.get("type") == "step"), key=lambda e: e["step"])
        samples = _records(run / "samples.jsonl")
        end = next((r for r in samples if r["type"] == "sampler_end"), {})
        prof = json.loads((run / "profile.json").read_text())
        runs.append({"name": run.name, "t1": [e["t1"] for e in steps], "images": [e["images"] for e in steps],
                     "start": samples[0]["t"],
                     "switches": [[r["t"], r["type"] == "sampler_resume"] for r in samples
                                  if r["type"] in ("sampler_pause", "sampler_resume")],
                     "sampler_cpu_pct": end.get("self_cpu_pct"), "sampler_hz": end.get("hz"),
                     "recorder_us_per_step": prof["summary"].get("recorder_us_per_step")})
    out = {"runs": runs}
    if a.recorder_cost:
        out["recorder_cost"] = json.loads(Path(a.recorder_cost).read_text())
    Path(a.out).write_text(json.dumps(out))


def blocks(run: dict, first: int = FIRST, tail: int = TAIL) -> list[tuple[bool, float]]:
    """(sampler on?, median step interval) for each block of the run holding at least 3 whole step intervals."""
    edges = [run["start"]] + [t for t, _ in run["switches"]]
    states = [True] + [on for _, on in run["switches"]]
    t1 = run["t1"]
    per: dict[int, list[float]] = {}
    for a, b in zip(t1[first - 1:len(t1) - tail - 1], t1[first:len(t1) - tail], strict=False):
        for i, edge in enumerate(edges):
            nxt = edges[i + 1] if i + 1 < len(edges) else float("inf")
            if edge <= a and b <= nxt:
                per.setdefault(i, []).append(b - a)
                break
    return [(states[i], statistics.median(v)) for i, v in sorted(per.items()) if len(v) >= 3]


def ratio(groups: list[list[tuple[bool, float]]]) -> float:
    on = [m for g in groups for s, m in g if s]
    off = [m for g in groups for s, m in g if not s]
    return statistics.median(on) / statistics.median(off)


def effect(groups: list[list[tuple[bool, float]]], draws: int = 10_000, seed: int = 0) -> dict:
    """The on/off ratio of block medians, its 95% bootstrap interval, and the 95% range of the same ratio with the
    on/off labels permuted within each run (the noise floor)."""
    rng = random.Random(seed)
    boot, perm = [], []
    for _ in range(draws):
        boot.append(ratio([[rng.choice([x for x in g if x[0] == s]) for s, _ in g] for g in groups]))
        shuffled = []
        for g in groups:
            labels = [s for s, _ in g]
            rng.shuffle(labels)
            shuffled.append([(s, m) for s, (_, m) in zip(labels, g, strict=False)])
        perm.append(ratio(shuffled))
    boot.sort()
    perm.sort()

    def q(v: list[float], p: float) -> float:
        return v[min(len(v) - 1, int(p * len(v)))]

    return {"ratio": ratio(groups), "ci95": (q(boot, 0.025), q(boot, 0.975)),
            "null95": (q(perm, 0.025), q(perm, 0.975)),
            "blocks_on": sum(s for g in groups for s, _ in g), "blocks_off": sum(not s for g in groups for s, _ in g)}


def report(a) -> None:
    res = json.loads(Path(a.results).read_text())
    groups = [blocks(r) for r in res["runs"]]
    e = effect(groups)
    rows = []
    for r, g in zip(res["runs"], groups, strict=False):
        on = [m * 1000 for s, m in g if s]
        off = [m * 1000 for s, m in g if not s]
        step_ms = statistics.median([b - a for a, b in itertools.pairwise(r["t1"][FIRST:])]) * 1000
        rec_us = r['recorder_us_per_step']
        rows.append(f"| {r['name']} | {len(on)} + {len(off)} | {' '.join(f'{x:.0f}' for x in on)} | "
                    f"{' '.join(f'{x:.0f}' for x in off)} | {statistics.median(on) / statistics.median(off):.3f} | "
                    f"{r['sampler_cpu_pct']} | {rec_us:.0f} ({rec_us / 10 / step_ms:.1f}% of {step_ms:.0f} ms) |")
    rc = res.get("recorder_cost")
    cost = "" if not rc else (
        f"\n`python bench/recorder_cost.py` on the same kind of machine ({rc['gpu']}, torch {rc['torch']}, "
        f"{rc['tensors']} live tensors, {rc['reps']} interleaved repetitions of {rc['calls']} calls): torch's three "
        f"functions {rc['torch_calls']['median_us']:.0f} us a step (range {rc['torch_calls']['min_us']:.0f}-"
        f"{rc['torch_calls']['max_us']:.0f}), one nested read {rc['nested']['median_us']:.0f} us "
        f"({rc['nested']['min_us']:.0f}-{rc['nested']['max_us']:.0f}): {rc['ratio']:.1f}x less.\n")
    lo, hi = e["ci95"]
    span = (min(m for g in groups for _, m in g) * 1000, max(m for g in groups for _, m in g) * 1000)
    nlo, nhi = e["null95"]
    rec_lo = min(r['recorder_us_per_step'] for r in res['runs'])
    rec_hi = max(r['recorder_us_per_step'] for r in res['runs'])
    body = f"""### Profiler overhead inside one run (sampler on/off blocks; recorder self-timing)

Date: {a.date}, an NVIDIA H200 (16 cores). `PART=inrun bash bench/gpu_fixtures.sh`: three `yolodoctor profile`
runs of 400 steps (Ultralytics defaults: batch 16, workers 8, yolo11n.yaml, imgsz 640, the 8,000-image dataset), the
sampler at 5 Hz sampling 3 s and pausing 3 s in turn (`--duty 3,3`). Step intervals from step {FIRST} to the last
{TAIL}, each block summarised by its median; then `python bench/report_profiler_inrun.py report
bench/results/profiler-inrun-{a.date}.json` (its docstring: the statistics).

| run | blocks on + off | block median step ms, sampler on | sampler off | on / off | \
sampler CPU % of one core | recorder us per step (share of the median step) |
|---|---|---|---|---|---|---|
{chr(10).join(rows)}

Sampler: over all runs, median "on" block / median "off" block = **{e['ratio']:.3f}** \
({e['blocks_on']} + {e['blocks_off']}
blocks), 95% bootstrap interval {lo:.3f}-{hi:.3f}; with the labels permuted (no effect by construction) the ratio
falls in {nlo:.3f}-{nhi:.3f}. The point estimate ({e['ratio'] - 1:+.1%} while sampling) lies inside that no-effect
range: the sampler's effect is not distinguishable from the block-to-block noise of this machine (block medians of
one state range over {span[0]:.0f}-{span[1]:.0f} ms), and this design bounds it only to the interval
above. The goal of at most 2% is neither shown met nor shown missed; more blocks (longer runs) would narrow it. \
The sampler itself is a side
process costing under 1% of one of the 16 cores (it takes no GIL and no lock of the training process).

Recorder: it times its own callbacks (the `recorder_s` of `train_end`): {rec_lo:.0f}-{rec_hi:.0f} us a step, \
about 1.4% of the
median step. That figure is an upper bound (it includes waiting for the GIL while the DataLoader's pin-memory thread
runs). The largest known part was reading three allocator counters through `torch.cuda.memory_allocated()`,
`max_memory_allocated()` and `memory_reserved()`, each of which builds and flattens the whole stats dict; the
recorder now reads the nested dict once (`recorder.allocator_counters`).
{cost}
Not yet measured on the GPU: the recorder's self-timed cost after that change (the runs above are from before it).
"""
    print(body)
    print(f"written: {write_report('profiler-inrun', body)}", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("out")
    c.add_argument("--runs", type=Path, nargs="+", required=True)
    c.add_argument("--recorder-cost", type=Path)
    r = sub.add_parser("report")
    r.add_argument("results")
    r.add_argument("--date", default="2026-12-03")
    a = ap.parse_args()
    collect(a) if a.cmd == "collect" else report(a)


if __name__ == "__main__":
    main()
