"""Benchmark: `yolodoctor check` on a synthetic 20,000-image dataset, cold and warm page cache (goal: <= 15 s).

    .venv/bin/python bench/check_20k.py [--images 20000] [--repeats 3] [--dir bench/out/ds20k] [--out FILE.json]

Generation is excluded from the timing (the dataset is reused when present). Cold runs first drop every dataset file
from the page cache with posix_fadvise(DONTNEED) (no root needed); cold and warm runs are interleaved. Each run is
the real command line in a fresh process (`yolodoctor check data=... --json`), so imports are included.

The results (the machine, the date, every run's seconds and stages, and the medians) are written as JSON to --out,
by default bench/results/check-20k-cpu-DATE.json; BENCHMARKS.md's table is read from that file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, describe_machine, machine, summary, today, write_report


def drop_tree(root: Path) -> int:
    n = 0
    for dirpath, _, files in os.walk(root):
        for name in files:
            try:
                fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            except OSError:
                continue
            try:
                os.fdatasync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                n += 1
            finally:
                os.close(fd)
    return n


def run_check(yaml_path: Path) -> tuple[float, dict]:
    exe = Path(sys.executable).with_name("yolodoctor")
    t = time.perf_counter()
    p = subprocess.run([str(exe), "check", f"data={yaml_path}", "--json"], capture_output=True, text=True,
                       env={**os.environ, "YOLO_OFFLINE": "1"})
    secs = time.perf_counter() - t
    if p.returncode not in (0, 1):
        raise SystemExit(f"check failed ({p.returncode}): {p.stderr.strip()}")
    return secs, json.loads(p.stdout)


def table_rows(medians: dict[str, dict]) -> list[str]:
    """BENCHMARKS.md's table rows from the results' "summary" (the medians per page-cache state)."""
    return [f"| {state} | {m['median_s']:.2f} | {m['min_s']:.2f}-{m['max_s']:.2f} | {m['runs']} | "
            + ", ".join(f"{k} {v:.2f}" for k, v in m["median_stage_s"].items()) + " |"
            for state, m in medians.items()]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dir", type=Path, default=ROOT / "bench" / "out" / "ds20k")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / f"check-20k-cpu-{dt.date.today()}.json",
                    help="the results JSON (default bench/results/check-20k-cpu-DATE.json)")
    ap.add_argument("--no-write", action="store_true",
                    help="print only; write neither --out nor bench/out/reports/check-20k.md")
    a = ap.parse_args()
    started = dt.datetime.now().astimezone()
    host = describe_machine()
    load_start = [round(x, 2) for x in os.getloadavg()]

    from yolodoctor.datasets.synth import make_dataset

    yaml_path = a.dir / "data.yaml"
    marker = a.dir / ".yolodoctor-dataset"
    if not (marker.exists() and json.loads(marker.read_text()).get("counts", {}).get("train") == a.images):
        t = time.perf_counter()
        info = make_dataset(a.dir, images=a.images, seed=0, force=marker.exists())
        print(f"generated {info.train_images}+{info.val_images} images in {time.perf_counter() - t:.0f} s",
              file=sys.stderr)
    times: dict[str, list[float]] = {"cold": [], "warm": []}
    stages: dict[str, list[dict]] = {"cold": [], "warm": []}
    runs: list[dict] = []
    for i in range(a.repeats):
        for state in ("cold", "warm"):
            if state == "cold":
                drop_tree(a.dir)
            load = os.getloadavg()[0]
            secs, out = run_check(yaml_path)
            times[state].append(secs)
            stages[state].append(out["facts"].get("check.seconds", {}))
            runs.append({"repeat": i + 1, "page_cache": state, "seconds": round(secs, 3),
                         "stages": stages[state][-1], "load_average_1min_before": round(load, 2)})
            print(f"run {i + 1} {state}: {secs:.2f} s  stages={stages[state][-1]}", file=sys.stderr)
    medians: dict[str, dict] = {}
    for state in ("cold", "warm"):
        s = summary(times[state])
        st = {k: sorted(x[k] for x in stages[state])[len(stages[state]) // 2] for k in stages[state][0]}
        medians[state] = {"median_s": round(s["median"], 3), "min_s": round(s["min"], 3),
                          "max_s": round(s["max"], 3), "runs": s["n"], "median_stage_s": st}
    rows = table_rows(medians)
    ok = max(summary(times['cold'])['median'], summary(times['warm'])['median']) <= 15
    body = f"""## `check` on {a.images:,} images (goal <= 15 s)

Machine: {machine()}. Date: {today()}. Command: \
`.venv/bin/python bench/check_20k.py --images {a.images} --repeats {a.repeats}`.
Dataset: `make-dataset --images {a.images}` (640x480 JPEG, detect), generation excluded. Each run is a fresh
`yolodoctor check data=... --json` process (imports included); cold runs drop every dataset file from the page cache
first (posix_fadvise DONTNEED); cold and warm interleaved.

| page cache | median s | range s | runs | median seconds per stage |
|---|---|---|---|---|
{chr(10).join(rows)}

Goal met: {'yes' if ok else 'NO'}.
"""
    print(body)
    if not a.no_write:
        result = {"benchmark": "check-20k", "date": started.date().isoformat(), "started": started.isoformat(),
                  "machine": host, "images": a.images, "repeats": a.repeats,
                  "command": f".venv/bin/python bench/check_20k.py --images {a.images} --repeats {a.repeats}",
                  "load_average_at_start": load_start, "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
                  "runs": runs, "summary": medians, "goal_s": 15.0, "goal_met": ok}
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"written: {a.out}", file=sys.stderr)
        print(f"written: {write_report('check-20k', body)}", file=sys.stderr)


if __name__ == "__main__":
    main()
