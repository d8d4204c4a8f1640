"""Short trainings on the GPU: what `profile` and `fix --verify --apply` cost against the training they serve.

    python3 bench/short_trainings.py run [--seconds 540] [--out DIR]   (repo root, on a GPU machine; exits 3 while a
                                                                         stage still runs: run it again)
    python3 bench/short_trainings.py report DIR                        (DIR: the results.json files a run left)

Two trainings of a few thousand images (SCENARIOS below). For each, in order: the dataset; the training run plainly
(`python -c "YOLO(...).train(...)"`, timed from outside, no yolodoctor); `yolodoctor profile` of it (default
steps); `yolodoctor fix --verify --apply` on that profile with its default budget. Each stage runs detached (its own
process session) under $SHORT_WORK (default /tmp/short) and leaves STAGE.rc and STAGE.ms (its wall milliseconds); a
run waits at most --seconds and exits 3 while a stage still runs, and running it again goes on where it stopped
(the stages' state stays under $SHORT_WORK). With --out DIR, every run copies there each started scenario's
results.json (walls, fix's JSON summary, the applied run's summary).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = Path(os.environ.get("SHORT_WORK") or "/tmp/short")
SCENARIOS = {
    # one epoch, a loader of 2 workers for batch 32: 4,000 JPEGs, 125 steps
    "jpg4k-1ep": {"dataset": ("jpg", 4000, "640x480"),
                  "args": {"model": "yolo11n.yaml", "imgsz": 640, "batch": 32, "workers": 2, "epochs": 1}},
    # two epochs of large PNGs at batch 16 with 4 workers: decode-bound, 188 steps
    "png1500-2ep": {"dataset": ("png", 1500, "1280x960"),
                    "args": {"model": "yolo11s.yaml", "imgsz": 640, "batch": 16, "workers": 4, "epochs": 2}},
}
STAGES = ("dataset", "plain", "profile", "fix")


def _train_kw(sc: dict, d: Path, name: str) -> dict:
    return {**sc["args"], "data": str(d / "ds" / "data.yaml"), "plots": False, "project": str(d / "ul"),
            "name": name}


def commands(name: str, sc: dict) -> dict[str, str]:
    d = WORK / name
    py, yd = shlex.quote(sys.executable), f"{shlex.quote(sys.executable)} -m yolodoctor"
    fmt, n, size = sc["dataset"]
    kv = " ".join(shlex.quote(f"{k}={v}") for k, v in _train_kw(sc, d, "profiled").items())
    kw = {k: v for k, v in _train_kw(sc, d, "plain").items() if k != "model"}
    plain = f"from ultralytics import YOLO; YOLO({sc['args']['model']!r}).train(**{kw!r})"
    return {
        "dataset": f"{yd} make-dataset {d / 'ds'} --images {n} --format {fmt} --size {size} --force",
        "plain": f"{py} -c {shlex.quote(plain)}",
        "profile": f"{yd} profile {kv} --out {d / 'profile'} --json > {d / 'profile.json'}",
        "fix": f"{yd} fix {d / 'profile'} --verify --apply --json > {d / 'fix.json'}",
    }


def _start(d: Path, stage: str, cmd: str) -> None:
    script = (f"t0=$(date +%s%N); ( {cmd} ) > {d / stage}.log 2>&1; rc=$?; t1=$(date +%s%N); "
              f"echo $(( (t1 - t0) / 1000000 )) > {d / stage}.ms; echo $rc > {d / stage}.rc")
    subprocess.Popen(["bash", "-c", script], start_new_session=True, cwd=ROOT, stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     env={**os.environ, "YOLO_OFFLINE": "1", "PYTHONUNBUFFERED": "1"})
    (d / f"{stage}.started").write_text(str(time.time()))


def run(seconds: float, out: Path | None = None) -> int:
    t0 = time.monotonic()
    for name, sc in SCENARIOS.items():
        d = WORK / name
        d.mkdir(parents=True, exist_ok=True)
        for stage, cmd in commands(name, sc).items():
            if (d / f"{stage}.rc").exists():
                continue
            if not (d / f"{stage}.started").exists():
                print(f"{name}: {stage} ...", flush=True)
                _start(d, stage, cmd)
            while not (d / f"{stage}.rc").exists():
                if time.monotonic() - t0 > seconds:
                    print(f"{name}: {stage} still running: run again to wait for it", flush=True)
                    collect(out)
                    return 3
                time.sleep(2)
            rc = (d / f"{stage}.rc").read_text().strip()
            print(f"{name}: {stage} rc={rc} in {_seconds(d, stage)} s", flush=True)
        collect(out)
    return 0


def _seconds(d: Path, stage: str) -> float | None:
    f = d / f"{stage}.ms"
    try:
        return int(f.read_text()) / 1000
    except (OSError, ValueError):
        return None


def results(name: str) -> dict:
    d = WORK / name
    out: dict = {"name": name, **SCENARIOS[name]}
    for stage in STAGES:
        out[f"{stage}_s"] = _seconds(d, stage)
        rc = d / f"{stage}.rc"
        out[f"{stage}_rc"] = int(rc.read_text()) if rc.exists() else None
    try:
        fix = json.loads((d / "fix.json").read_text())
    except (OSError, ValueError):
        return out
    applied = fix.get("applied") or {}
    out["verify"] = fix.get("verify")
    out["kept"] = [f"{c['key']}={c['after']}" for c in (fix.get("trials") or {}).get("kept", [])] \
        if isinstance(fix.get("trials"), dict) else []
    out["plan"] = [f"{c['key']}={c['after']}" for c in (fix.get("plan") or {}).get("changes", [])]
    out["applied_changes"] = [f"{c['key']}={c['after']}" for c in applied.get("changes", [])]
    out["applied_verified"] = applied.get("verified")
    out["speedups"] = applied.get("speedups")
    if applied.get("run_dir"):
        try:
            prof = json.loads((Path(applied["run_dir"]) / "profile.json").read_text())
        except (OSError, ValueError):
            prof = {}
        s = prof.get("summary") or {}
        out["applied"] = {"wall_s": (s.get("phases") or {}).get("total"), "training_s": s.get("training_s"),
                          "images_per_s": s.get("images_per_s"), "window_valid": (s.get("window") or {}).get("valid"),
                          "phases": s.get("phases"), "trace": prof.get("trace"),
                          "loader_capacity": prof.get("loader_capacity")}
    try:
        p = json.loads((d / "profile.json").read_text())["profile"]
        ps = p.get("summary") or {}
        out["profile"] = {"images_per_s": ps.get("images_per_s"), "bounded": ps.get("bounded"),
                          "steps": ps.get("steps"), "training_s": ps.get("training_s"),
                          "wall_s": (ps.get("phases") or {}).get("total")}
    except (OSError, ValueError, KeyError):
        pass
    return out


def collect(out: Path | None) -> None:
    if out is None:
        return
    out.mkdir(parents=True, exist_ok=True)
    for name in SCENARIOS:
        if (WORK / name).exists():
            (out / f"{name}.results.json").write_text(json.dumps(results(name), indent=1))


def _f(v: float | None, unit: str = " s") -> str:
    return f"{v:.1f}{unit}" if isinstance(v, (int, float)) else "-"


def report(folder: Path) -> str:
    rows = []
    for f in sorted(folder.glob("*.results.json")):
        r = json.loads(f.read_text())
        ap = r.get("applied") or {}
        ups = r.get("speedups") or {}
        steps = (ups.get("steps") or {}).get("ratio")
        wall = r["plain_s"] / ap["wall_s"] if r.get("plain_s") and ap.get("wall_s") else None
        v = r.get("verify") or {}
        rows.append(f"| {r['name']} | {_f(r.get('plain_s'))} | {_f(r.get('profile_s'))} | {_f(r.get('fix_s'))} "
                    f"| {_f(v.get('verify_s'))} est., budget {_f(v.get('budget_s'))}, "
                    f"{'ran' if v.get('fits') else 'skipped'} | {', '.join(r.get('applied_changes') or []) or '-'} "
                    f"({'verified' if r.get('applied_verified') else 'unverified'}) | {_f(ap.get('wall_s'))} | "
                    f"{_f(steps, 'x')} | {_f(wall, 'x')} |")
    return ("| training | plain training | `profile` | `fix --verify --apply` | verify | applied | applied training "
            "| speed-up on steps | speed-up on wall time |\n|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--seconds", type=float, default=540)
    r.add_argument("--out", type=Path, default=None, help="copy each scenario's results.json here")
    p = sub.add_parser("report")
    p.add_argument("folder", type=Path)
    a = ap.parse_args(argv)
    if a.cmd == "run":
        return run(a.seconds, a.out)
    print(report(a.folder))
    return 0


if __name__ == "__main__":
    sys.exit(main())
