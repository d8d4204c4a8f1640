"""Where one `fix --verify` trial's wall time goes, part by part, for two builds of yolodoctor side by side.

A trial is a bounded `profile` of the user's training with no trace and no loader timing; its record's
``summary.phases`` say where the time went (start, imports, model, trainer, setup, first batch, steps, end). The two
builds run interleaved (A B A B ...) on the same small synthetic dataset, and the medians and spreads of each part
are printed.

    python bench/trial_cost.py --a PATH_A --b PATH_B [--reps 5] [--data DATA_YAML] [KEY=VALUE ...]

PATH_A / PATH_B: source trees of yolodoctor (a `git worktree` of another commit, or this checkout), each run with
the same interpreter and that tree first on PYTHONPATH. Without --data a 256-image dataset is made in bench/out/.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_ARGS = ["model=yolo11n.yaml", "imgsz=160", "batch=8", "epochs=1", "workers=0", "plots=False"]


def one(tree: Path, data: str, args: list[str], work: Path) -> dict[str, float]:
    out = Path(tempfile.mkdtemp(dir=work)) / "run"
    env = {**os.environ, "YOLO_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(tree), *filter(None, [os.environ.get("PYTHONPATH")])])}
    subprocess.run([sys.executable, "-m", "yolodoctor", "profile", f"data={data}", *args, f"project={work / 'ul'}",
                    "--no-trace", "--loader-seconds", "0", "--out", str(out), "--json"],
                   env=env, cwd=work, capture_output=True, text=True)  # its diagnosis may fail: the record stands
    return json.loads((out / "profile.json").read_text())["summary"]["phases"]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", type=Path, required=True)
    ap.add_argument("--b", type=Path, required=True)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--data", default=None)
    ap.add_argument("args", nargs="*")
    a = ap.parse_args(argv)
    work = ROOT / "bench" / "out" / "trial-cost"
    work.mkdir(parents=True, exist_ok=True)
    data = a.data
    if data is None:
        ds = work / "ds"
        if not (ds / "data.yaml").exists():
            subprocess.run([sys.executable, "-m", "yolodoctor", "make-dataset", str(ds), "--images", "256",
                            "--size", "320x240", "--force"], check=True, capture_output=True)
        data = str(ds / "data.yaml")
    args = a.args or DEFAULT_ARGS
    runs: dict[str, list[dict[str, float]]] = {"A": [], "B": []}
    for i in range(a.reps):
        for name in ("A", "B") if i % 2 == 0 else ("B", "A"):
            runs[name].append(one(a.a if name == "A" else a.b, data, args, work))
    parts = list(dict.fromkeys(k for rs in runs.values() for r in rs for k in r))
    print(f"{a.reps} trials each, interleaved; median seconds (min-max)")
    print("| part | A | B |")
    print("|---|---|---|")
    for k in parts:
        cells = []
        for name in ("A", "B"):
            v = [r[k] for r in runs[name] if k in r]
            cells.append(f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})" if v else "-")
        print(f"| {k} | {cells[0]} | {cells[1]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
