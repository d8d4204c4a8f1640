"""The profiler's figures on a GPU machine, as a report: time to a written profile and profiler overhead.

    python bench/report_profiler_gpu.py collect OUT.json --walls WALLS.jsonl... --runs RUN_DIR... --overhead DIR...
    python bench/report_profiler_gpu.py report RESULTS.json

`collect` keeps what the report needs from the directories that bench/gpu_fixtures.sh left (PART=fixtures,
scenarios, overhead): each profile's wall time and event timeline, and each overhead run's per-step end times, in
one small JSON (bench/results/). `report` computes the figures from that JSON and writes the report.

Overhead: plain training (bench/plain_train.py) and `yolodoctor profile` run interleaved, 140 steps each; images/s
are compared over steps 60-129: past a full prefetch queue (8 workers x 4) and before the profiler's trace window
(its last 5 steps), so that what is compared is the recorder and the sampler, not the trace.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_report

FIRST, LAST = 60, 130  # steps [FIRST, LAST): the compared window


def _steps(run: Path) -> list[dict]:
    return sorted((e for e in map(json.loads, open(run / "events.jsonl")) if e.get("type") == "step"),
                  key=lambda e: e["step"])


def collect(a: argparse.Namespace) -> None:
    out: dict[str, list[dict]] = {"profiles": [], "overhead": []}
    for w in a.walls:
        for line in Path(w).read_text().splitlines():
            row = json.loads(line)
            run = next((r for r in a.runs if r.name == row["name"]), None)
            if run is None:
                continue
            ev = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
            t0 = ev[0]["t"]
            marks = {e["type"]: round(e["t"] - t0, 2) for e in ev if e["type"] != "step"}
            steps = [e for e in ev if e["type"] == "step"]
            prof = json.loads((run / "profile.json").read_text())
            out["profiles"].append({**row, "marks": marks, "steps": len(steps),
                                    "first_step_s": round(steps[0]["t0"] - t0, 2),
                                    "last_step_s": round(steps[-1]["t1"] - t0, 2),
                                    "compile_active": prof["settings"].get("compile_active")})
    for batch, d in enumerate(a.overhead):
        for f in d.glob("plain-*.json"):
            x = json.loads(f.read_text())
            out["overhead"].append({"batch": batch, "order": int(f.stem.split("-")[-1]), "config": "plain",
                                    "ends": x["ends"], "images": x["images"]})
        for run in d.glob("prof-*"):
            s = _steps(run)
            out["overhead"].append({"batch": batch, "order": int(run.name.split("-")[-1]),
                                    "config": run.name.split("-")[1], "ends": [e["t1"] for e in s],
                                    "images": [e["images"] for e in s],
                                    "traced": [e["step"] for e in s if e.get("traced")]})
    Path(a.out).write_text(json.dumps(out))


def rate(r: dict) -> float:
    assert not set(r.get("traced", [])) & set(range(FIRST - 1, LAST)), "the window must not hold traced steps"
    return sum(r["images"][FIRST:LAST]) / (r["ends"][LAST - 1] - r["ends"][FIRST - 1])


def slices(r: dict) -> str:
    d = [(b - a) * 1000 for a, b in zip(r["ends"], r["ends"][1:], strict=False)]
    return " ".join(f"{statistics.median(d[i:i + 10]):.0f}" for i in range(0, min(len(d), LAST), 20))


def spread(v: list[float]) -> str:
    return f"{statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f})"


def wall_rows(profiles: list[dict]) -> list[str]:
    """The time-to-profile table's rows (BENCHMARKS.md's), one per run, its exit code beside its wall time."""
    rows = []
    for p in profiles:
        m = p["marks"]
        trace_s = m.get("trace", 0) - p["last_step_s"] if "trace" in m else 0
        loader_s = m.get("loader_capacity", 0) - m.get("loader_capacity_start", 0)
        rows.append(f"| {p['name']} | {p['rc']} | {p['wall_s']:.1f} | {m.get('train_begin', 0):.1f} | "
                    f"{p['first_step_s'] - m.get('train_begin', 0):.1f} | {p['steps']} in "
                    f"{p['last_step_s'] - p['first_step_s']:.1f} | {trace_s:.1f} | {loader_s:.1f} | "
                    f"{p['wall_s'] - m.get('run_end', p['wall_s']):.1f} |")
    return rows


def exits(profiles: list[dict]) -> str:
    """Which runs exited other than 0, from the results' exit codes. The results keep no run's output, so the reason
    given is the one reported with these runs when they were collected, with what the repository holds that bears
    it out (the profiles recorded complete; the next day's records on the same kind of machine carry the error)."""
    failed = [p["name"] for p in profiles if p.get("rc") != 0]
    if not failed:
        return "Every run exited 0."
    codes = sorted({p["rc"] for p in profiles if p.get("rc") != 0})
    return (f"{len(failed)} of {len(profiles)} runs exited {', '.join(map(str, codes))}: {', '.join(failed)}. The "
            "results file keeps each command's exit code, not its output, so it does not say why. As reported when "
            "they ran, the diagnosis after each run failed to import a dependency missing on that machine "
            "(prompt_toolkit, which the CEL package imports) after the profile was written: their profiles are "
            "recorded complete (fixtures/profiles/h200-defaults, h200-workers0, h200-fp32), and the next day's sweep "
            "records from H200 machines carry the same error as facts_error "
            "(bench/results/h200-sweep-2026-12-03/sweep.json). Their wall time therefore holds no finished "
            "diagnosis.")


def report(a: argparse.Namespace) -> None:
    res = json.loads(Path(a.results).read_text())
    walls = wall_rows(res["profiles"])
    rows: list[str] = []
    by: dict[tuple[int, str], list[float]] = {}
    for r in sorted(res["overhead"], key=lambda r: (r["batch"], r["order"])):
        ips = rate(r)
        by.setdefault((r["batch"], r["config"]), []).append(ips)
        rows.append(f"| {r['batch'] + 1} | {r['config']} | {ips:.1f} | {slices(r)} |")
    batches = sorted({b for b, _ in by})
    ratio_rows = []
    def pick(b: int | None, c: str) -> list[float]:  # b None: every batch
        return [v for (bb, cc), vs in by.items() if cc == c and b in (None, bb) for v in vs]

    for b in [*batches, None]:
        plain, full = pick(b, "plain"), pick(b, "full")
        if plain and full:
            ratio_rows.append(f"| {'all' if b is None else b + 1} | {len(plain)} + {len(full)} | {spread(plain)} | "
                              f"{spread(full)} | {statistics.median(full) / statistics.median(plain):.3f} | "
                              f"{(max(plain) - min(plain)) / statistics.median(plain):.0%} |")
    body = f"""## Profiler on the H200

Machine: an NVIDIA H200 (16 cores, driver 580.159, torch 2.11, CUDA 13, Python 3.12, Ultralytics 8.4.190).
Date: {a.date}. Dataset: `make-dataset --images 8000` (640x480 JPEG). Model yolo11n.yaml, imgsz 640, epochs=20
(mosaic on). Commands: `PART=fixtures bash bench/gpu_fixtures.sh` (then `scenarios`, `overhead` with REPS=5 and a
second batch of 3), `python bench/report_profiler_gpu.py collect ...` (kept in bench/results/), then
`python bench/report_profiler_gpu.py report bench/results/profiler-gpu-2026-12-02.json`.

### Time from start to a written profile, default `--steps`

Seconds from the command's start; the columns split the run using its own event timeline (Ultralytics' setup:
model build, first label scan, AMP check; the bounded steps; summarising the trace; timing the loader alone; the
imports and quick check before the run starts, and the diagnosis after the profile is written). Runs on a fresh \
dataset (the first one scans the 8,000 labels).

| run | exit code | wall s | to train start | setup to first step | steps in s | trace summary s | loader timing s | \
before and after the run s |
|---|---|---|---|---|---|---|---|---|
{chr(10).join(walls)}

{exits(res['profiles'])}

Goal <= 60 s with compile excluded: missed by the defaults run ({res['profiles'][0]['wall_s']:.0f} s on a fresh
dataset); workers0 and fp32 took 50-56 s but exited 2, so no complete command is shown within the goal; the three
later scenarios are longer by design (217 steps at batch 128; a 43 s first scan of the 1080p PNGs; autobatch and a
57M-parameter model). Where the time goes: about 11 s
before training starts and 7-12 s outside the run (imports, the check probe, the diagnosis), Ultralytics' setup
(9 s with the first label scan), about 6-10 s to export and summarise the trace after its 5 steps, and 8 s (default
`--loader-seconds`) plus the first batch to time the loader alone. What would close the gap: summarising the
trace while the loader is timed (both run after the measured steps), and a shorter loader timing when its rate
is already stable.

### Profiler overhead (images/s outside the trace window)

Interleaved plain / profiled runs, 140 steps each, Ultralytics defaults (batch 16, workers 8); images/s over steps
{FIRST}-{LAST - 1} (no traced step inside). The last column is the median step time (ms) of 10-step slices every
20 steps.

| batch | config | images/s | median step ms at steps 0, 20, 40, ... |
|---|---|---|---|
{chr(10).join(rows)}

| batch | runs plain + full | plain images/s median (range) | full images/s median (range) | full / plain | \
spread of plain |
|---|---|---|---|---|---|
{chr(10).join(ratio_rows)}

Not demonstrated: the goal is an overhead of at most 2%, and the spread of *plain* training alone between runs on
this machine is 20-40% (step times of 45 ms in one run, 70 ms in the next, with the same arguments). In the first
batch the profiled runs' median was within 3% of plain's; in the second, later batch plain ran at 290-335 images/s
and every profiled run slower (212-277). A 2% effect cannot be resolved from run-to-run comparisons at this noise;
the next section measures it inside one run instead (the sampler switched on and off in alternate blocks of
steps; the recorder's per-step cost timed directly), which removes the between-run variance.
"""
    print(body)
    print(f"written: {write_report('profiler-gpu', body)}", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("out")
    c.add_argument("--walls", type=Path, nargs="+", required=True)
    c.add_argument("--runs", type=Path, nargs="+", required=True)
    c.add_argument("--overhead", type=Path, nargs="+", required=True)
    r = sub.add_parser("report")
    r.add_argument("results")
    r.add_argument("--date", default="2026-12-02")
    a = ap.parse_args()
    collect(a) if a.cmd == "collect" else report(a)


if __name__ == "__main__":
    main()
