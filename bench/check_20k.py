"""Benchmark: `yolodoctor check` on a synthetic 20,000-image dataset, cold and warm page cache (goal: <= 15 s).

    .venv/bin/python bench/check_20k.py [--images 20000] [--repeats 3] [--dir bench/out/ds20k]

Generation is excluded from the timing (the dataset is reused when present). Cold runs first drop every dataset file
from the page cache with posix_fadvise(DONTNEED) (no root needed); cold and warm runs are interleaved. Each run is
the real command line in a fresh process (`yolodoctor check data=... --json`), so imports are included.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, machine, summary, today, write_report


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
    dt = time.perf_counter() - t
    if p.returncode not in (0, 1):
        raise SystemExit(f"check failed ({p.returncode}): {p.stderr.strip()}")
    return dt, json.loads(p.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dir", type=Path, default=ROOT / "bench" / "out" / "ds20k")
    ap.add_argument("--no-write", action="store_true", help="print only; do not write bench/out/reports/check-20k.md")
    a = ap.parse_args()

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
    for i in range(a.repeats):
        for state in ("cold", "warm"):
            if state == "cold":
                drop_tree(a.dir)
            dt, out = run_check(yaml_path)
            times[state].append(dt)
            stages[state].append(out["facts"].get("check.seconds", {}))
            print(f"run {i + 1} {state}: {dt:.2f} s  stages={stages[state][-1]}", file=sys.stderr)
    rows = []
    for state in ("cold", "warm"):
        s = summary(times[state])
        st = {k: sorted(x[k] for x in stages[state])[len(stages[state]) // 2] for k in stages[state][0]}
        rows.append(f"| {state} | {s['median']:.2f} | {s['min']:.2f}-{s['max']:.2f} | {s['n']} | "
                    + ", ".join(f"{k} {v:.2f}" for k, v in st.items()) + " |")
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
        print(f"written: {write_report('check-20k', body)}", file=sys.stderr)


if __name__ == "__main__":
    main()
