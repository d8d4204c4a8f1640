"""Where a training process's threads spend their wall time, by py-spy (sampling from outside, --nonblocking: the
training is never paused). Three recorders run side by side for the same seconds: every sample (--idle), samples
whose thread holds the GIL (--idle --gil) and samples whose thread is on a CPU (no --idle). For one thread, the three
counts over the same window give the share of its wall time on a CPU and holding the GIL; a thread off the CPU and
without the GIL is waiting (a CUDA synchronisation, a queue, a lock - or the GIL itself, when another thread holds it).

    python bench/pyspy_probe.py summarise ALL.txt GIL.txt CPU.txt --tid TID   # the summary the benchmark records

The benchmark (bench/h200_benchmark.py --py-spy SECONDS) starts it once a bounded run is in its steady window.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

LINE = re.compile(r"^thread \((\d+)\)(?:: ([^;]*?))?(?:;(.*))? (\d+)$")  # a thread without a name has no ": NAME"
KINDS = ("all", "gil", "cpu")
FLAGS = {"all": ["--idle"], "gil": ["--idle", "--gil"], "cpu": []}


def binary() -> str | None:
    return shutil.which("py-spy")


def training_pid(run: Path) -> int | None:
    """The training process of a run directory, as its sampler recorded it (the first record of samples.jsonl)."""
    try:
        with open(run / "samples.jsonl") as f:
            first = json.loads(f.readline() or "{}")
    except (OSError, json.JSONDecodeError):
        return None
    return first.get("pid") if first.get("type") == "sampler_start" and isinstance(first.get("pid"), int) else None


def start(pid: int, seconds: float, prefix: Path, rate: int = 100) -> list[subprocess.Popen]:
    """The three recorders, started side by side (earlier files of this prefix removed first)."""
    exe = binary()
    if exe is None:
        return []
    out = []
    for k in KINDS:
        for ext in ("txt", "log"):
            Path(f"{prefix}.{k}.{ext}").unlink(missing_ok=True)
        with open(f"{prefix}.{k}.log", "w") as log:
            out.append(subprocess.Popen([exe, "record", *FLAGS[k], "--nonblocking", "--threads", "--format", "raw",
                                         "-r", str(rate), "-d", str(int(seconds)), "-p", str(pid), "-o",
                                         f"{prefix}.{k}.txt"], stdout=subprocess.DEVNULL, stderr=log))
    return out


def parse(path: Path) -> dict[int, dict]:
    """py-spy's raw output -> {tid: {"name", "samples", "leaves": Counter(leaf frame -> samples)}}."""
    out: dict[int, dict] = {}
    for line in path.read_text(errors="replace").splitlines():
        m = LINE.match(line.strip())
        if not m:
            continue
        tid, name, stack, n = int(m[1]), m[2] or f"thread {m[1]}", m[3] or "", int(m[4])
        t = out.setdefault(tid, {"name": name, "samples": 0, "leaves": Counter()})
        t["samples"] += n
        t["leaves"][short(stack.rsplit(";", 1)[-1]) if stack else "(no Python frame)"] += n
    return out


def short(frame: str) -> str:
    """'loss (/x/y/ultralytics/utils/loss.py:212)' -> 'loss (ultralytics/utils/loss.py:212)'."""
    m = re.match(r"^(.*) \((.*):(\d+)\)$", frame)
    if not m:
        return frame
    parts = Path(m[2]).parts
    keep = next((parts[i:] for i, p in enumerate(parts) if p in ("ultralytics", "torch", "yolodoctor")), parts[-2:])
    return f"{m[1]} ({'/'.join(keep)}:{m[3]})"


def summarise(paths: dict[str, Path], tid: int, top: int = 12) -> dict:
    """The training thread (``tid``, the process's main thread) and the process's other busy threads."""
    rec = {k: parse(p) for k, p in paths.items() if p.exists()}
    if "all" not in rec or tid not in rec["all"]:
        return {"error": "no samples of the training thread"}
    main = rec["all"][tid]
    n = main["samples"]

    def share(kind: str, t: int = tid) -> float | None:
        return round(rec[kind][t]["samples"] / rec["all"][t]["samples"], 3) if kind in rec and t in rec[kind] \
            else (0.0 if kind in rec else None)

    leaves = []
    for where, c in main["leaves"].most_common(top):
        leaves.append({"where": where, "share": round(c / n, 3),
                       "on_cpu": round(rec["cpu"][tid]["leaves"].get(where, 0) / c, 2) if tid in rec.get("cpu", {})
                       else 0.0,
                       "gil": round(rec["gil"][tid]["leaves"].get(where, 0) / c, 2) if tid in rec.get("gil", {})
                       else 0.0})
    others = []
    for t, v in rec["all"].items():
        if t == tid:
            continue
        gil = share("gil", t)
        cpu = share("cpu", t)
        if (gil or 0) > 0.02 or (cpu or 0) > 0.02:
            others.append({"thread": v["name"], "on_cpu": cpu, "gil": gil,
                           "top": v["leaves"].most_common(1)[0][0] if v["leaves"] else None})
    return {"samples": n, "on_cpu": share("cpu"), "gil": share("gil"), "leaves": leaves,
            "other_threads": sorted(others, key=lambda o: -(o["gil"] or 0))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("summarise")
    for k in KINDS:
        s.add_argument(k)
    s.add_argument("--tid", type=int, required=True)
    a = ap.parse_args(argv)
    print(json.dumps(summarise({k: Path(getattr(a, k)) for k in KINDS}, a.tid), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
