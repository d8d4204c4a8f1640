"""Where one `fix --verify` trial's wall time goes, part by part, for two builds of yolodoctor side by side.

A trial is a bounded `profile` of the user's training with no trace and no loader timing; its record's
``summary.phases`` say where the time went (start, imports, model, trainer, setup, first batch, steps, end). The two
builds run interleaved (A B A B ...) on the same small synthetic dataset, and the medians and spreads of each part
are printed.

    python bench/trial_cost.py --a PATH_A --b PATH_B [--reps 5] [--steps 35] [--data DATA_YAML] [--out FILE.json]
                               [KEY=VALUE ...]

PATH_A / PATH_B: source trees of yolodoctor (a `git worktree` of another commit, or this checkout), each run with
the same interpreter and that tree first on PYTHONPATH; a sitecustomize.py written beside the runs drops the
interpreter's editable install of yolodoctor from the import system, so that each build reads its own tree's shipped
rules (rules/), not those of the checkout the install points at. Without --data a 256-image dataset is made in
bench/out/. Both builds get the same explicit --steps (35: a trial's default bound at workers=0 in the builds before
and after the cut), so that each run is bounded as a trial is: `profile` without --steps measures a training no
longer than its bound whole, validation included, which a trial does not (the default 256-image, batch-8 training
has 32 steps).
The results (the machine, the date, each build's commit, every trial's parts in run order, and the medians) are
written as JSON to --out, by default bench/results/trial-cost-cpu-DATE.json (--out - prints only); BENCHMARKS.md's
table is read from that file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import describe_machine

ROOT = Path(__file__).resolve().parents[1]
ISOLATE = '''"""Written by bench/trial_cost.py: the build on PYTHONPATH reads its own rules/, not the installed ones."""
import sys

sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable___yolodoctor")]
'''
DEFAULT_ARGS = ["model=yolo11n.yaml", "imgsz=160", "batch=8", "epochs=1", "workers=0", "plots=False"]


def one(tree: Path, data: str, args: list[str], work: Path, steps: int) -> dict:
    out = Path(tempfile.mkdtemp(dir=work)) / "run"
    isolate = work / "isolate"
    isolate.mkdir(exist_ok=True)
    (isolate / "sitecustomize.py").write_text(ISOLATE)
    env = {**os.environ, "YOLO_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(tree), str(isolate), *filter(None, [os.environ.get("PYTHONPATH")])])}
    subprocess.run([sys.executable, "-m", "yolodoctor", "profile", f"data={data}", *args, f"project={work / 'ul'}",
                    "--steps", str(steps), "--no-trace", "--loader-seconds", "0", "--out", str(out), "--json"],
                   env=env, cwd=work, capture_output=True, text=True)  # its diagnosis may fail: the record stands
    summary = json.loads((out / "profile.json").read_text())["summary"]
    return {"phases": summary["phases"], "steps": summary.get("steps"), "bounded": summary.get("bounded")}


def commit_of(tree: Path) -> str | None:
    p = subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True)
    return p.stdout.strip() or None


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", type=Path, required=True)
    ap.add_argument("--b", type=Path, required=True)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--steps", type=int, default=35, help="each trial's bound, the same for both builds")
    ap.add_argument("--data", default=None)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / f"trial-cost-cpu-{dt.date.today()}.json"),
                    help="the results JSON (default bench/results/trial-cost-cpu-DATE.json; - prints only)")
    ap.add_argument("args", nargs="*")
    a = ap.parse_args(argv)
    started = dt.datetime.now().astimezone()
    load_start = [round(x, 2) for x in os.getloadavg()]
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
    order: list[dict] = []
    for i in range(a.reps):
        for name in ("A", "B") if i % 2 == 0 else ("B", "A"):
            trial = one(a.a if name == "A" else a.b, data, args, work, a.steps)
            runs[name].append(trial["phases"])
            order.append({"rep": i + 1, "build": name, **trial})
            print(f"rep {i + 1} {name}: {trial['phases'].get('total')} s, {trial['steps']} steps", file=sys.stderr)
    parts = list(dict.fromkeys(k for rs in runs.values() for r in rs for k in r))
    print(f"{a.reps} trials each, interleaved; median seconds (min-max)")
    print("| part | A | B |")
    print("|---|---|---|")
    medians: dict[str, dict[str, dict[str, float]]] = {"A": {}, "B": {}}
    for k in parts:
        cells = []
        for name in ("A", "B"):
            v = [r[k] for r in runs[name] if k in r]
            if v:
                medians[name][k] = {"median": round(statistics.median(v), 3), "min": round(min(v), 3),
                                    "max": round(max(v), 3), "n": len(v)}
            cells.append(f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})" if v else "-")
        print(f"| {k} | {cells[0]} | {cells[1]} |")
    if a.out != "-":
        result = {"benchmark": "trial-cost", "date": started.date().isoformat(), "started": started.isoformat(),
                  "machine": describe_machine(), "load_average_at_start": load_start,
                  "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
                  "builds": {"A": {"tree": str(a.a), "commit": commit_of(a.a)},
                             "B": {"tree": str(a.b), "commit": commit_of(a.b)}},
                  "reps": a.reps, "steps": a.steps,
                  "data": "256 synthetic 320x240 images" if a.data is None else a.data,
                  "train_args": args, "trials": order, "summary": medians}
        out = Path(a.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"written: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
