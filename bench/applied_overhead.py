"""What recording an applied training costs: the same training run plainly and as `fix --apply` relaunches it.

    python bench/applied_overhead.py [--pairs 3] [--epochs 15] [--images 96] [--out FILE]

`fix --apply` relaunches the user's training recorded lightly: its steps, its wall phases and samples at 1 Hz, no
profiler trace and no timing of the loader after it (fixing/apply.relaunch's call of run_profile). This script makes
that call in a process of its own (Python's start and yolodoctor's import included) and runs COMMAND alone (an
unmodified training script, fixtures/scripts/train_plain.py, on a synthetic dataset), interleaved A B, B A, A B ...,
and reports each pair's wall-time ratio (recorded / plain), their median and spread. Writes the rows as JSON to --out
(default bench/results/applied-overhead.json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "fixtures" / "scripts" / "train_plain.py"
# the call fix --apply makes (fixing/apply.relaunch) for a script, in a process of its own as fix's is
RELAUNCH = ("import sys; from yolodoctor.fixing.apply import LIGHT_HZ; from yolodoctor.profiling.runner import "
            "Measurement, run_profile; run_profile(None, command=sys.argv[2:], out=sys.argv[1], "
            "measure=Measurement(steps=None, trace=False, loader_seconds=0, hz=LIGHT_HZ))")


def timed(cmd: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    from yolodoctor.ulenv import users_env

    # both sides with Ultralytics' log as the user has it (the relaunch gives its training the same)
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True,
                       env=users_env({**os.environ, "YOLO_OFFLINE": "1", "PYTHONPATH": str(ROOT)}))
    if p.returncode != 0:
        raise SystemExit(f"{cmd[:4]} failed: {p.stderr[-1500:]}")
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--images", type=int, default=96)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "applied-overhead.json")
    a = ap.parse_args(argv)
    from yolodoctor.datasets.synth import make_dataset

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = make_dataset(work / "ds", images=a.images, val_images=8, width=160, height=120, workers=1).yaml_path
        train = [sys.executable, str(SCRIPT), str(data)]
        rows = []
        for i in range(a.pairs):
            runs = {"plain": [*train, str(work / f"ul-plain-{i}"), str(a.epochs)],
                    "recorded": [sys.executable, "-c", RELAUNCH, str(work / f"run-{i}"), *train,
                                 str(work / f"ul-rec-{i}"), str(a.epochs)]}
            order = ["plain", "recorded"] if i % 2 == 0 else ["recorded", "plain"]  # A B, then B A: no side first
            took = {k: timed(runs[k], work) for k in order}
            plain, rec = took["plain"], took["recorded"]
            prof = json.loads((work / f"run-{i}" / "profile.json").read_text())
            rows.append({"pair": i, "first": order[0], "plain_s": round(plain, 2), "recorded_s": round(rec, 2),
                         "ratio": round(rec / plain, 4),
                         "recorder_us_per_step": prof["summary"].get("recorder_us_per_step"),
                         "steps": prof["summary"].get("steps")})
            print(rows[-1], flush=True)
    ratios = [r["ratio"] for r in rows]
    doc = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
           "date": time.strftime("%Y-%m-%d"), "epochs": a.epochs, "images": a.images, "rows": rows,
           "ratio_median": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
           "command": "python bench/applied_overhead.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"recorded / plain: median {doc['ratio_median']:.3f} (min {doc['ratio_min']:.3f}, max "
          f"{doc['ratio_max']:.3f}) over {len(rows)} pairs; written {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
