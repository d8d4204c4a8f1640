"""How a run's steps move along the training: each run's step events cut into equal parts, with each part's median
step times, so a whole training and a bounded profile of the same arguments can be set side by side.

    python3 bench/step_trend.py bench/results/scenarios/NAME [--parts 5]

Reads every ``RUN.events.jsonl.gz`` of a scenario's results (bench/scenarios.py keeps them) or a run directory's
``events.jsonl``. Per part: its steps, the median CUDA-event time of a step (``gpu_ms``; absent on the CPU), the
median host compute and data wait (ms), images/s over the part (images / (wait + compute)), the loader queue's median
occupancy (``ready``) and the accumulation. Traced steps are left out, as the steady window leaves them out.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from yolodoctor.record.events import read_events
from yolodoctor.record.summary import steps_of


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def parts(steps: list[dict], k: int) -> list[dict]:
    """``steps`` cut into ``k`` consecutive parts of (nearly) equal size, each summarised."""
    steps = [s for s in steps if not s.get("traced")]
    k = max(1, min(k, len(steps)))
    out = []
    for j in range(k):
        part = steps[j * len(steps) // k:(j + 1) * len(steps) // k]
        if not part:
            continue
        t = sum((s.get("wait") or 0.0) + (s.get("compute") or 0.0) for s in part)
        num = [s["gpu_ms"] for s in part if isinstance(s.get("gpu_ms"), (int, float))]
        out.append({"first": part[0].get("n", part[0].get("step")), "last": part[-1].get("n", part[-1].get("step")),
                    "gpu_ms": _median(num),
                    "compute_ms": _median([1000 * s["compute"] for s in part if "compute" in s]),
                    "wait_ms": _median([1000 * (s.get("wait") or 0.0) for s in part]),
                    "images_per_s": sum(s.get("images") or 0 for s in part) / t if t > 0 else None,
                    "ready": _median([s["ready"] for s in part if isinstance(s.get("ready"), (int, float))]),
                    "accumulate": _median([s["accumulate"] for s in part if isinstance(s.get("accumulate"), int)])})
    return out


def runs(path: Path) -> dict[str, list[dict]]:
    """The step events of each run under ``path``: a scenario's results folder or one run directory."""
    if (path / "events.jsonl").exists() or (path / "events.jsonl.gz").exists():  # a run directory or a fixture
        return {path.name: steps_of(read_events(path / "events.jsonl"))}
    return {f.name.removesuffix(".events.jsonl.gz"): steps_of(read_events(f.with_suffix("")))
            for f in sorted(path.glob("*.events.jsonl.gz"))}


def _f(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def table(path: Path, k: int) -> str:
    lines = ["| run | steps | GPU ms | compute ms | wait ms | images/s | queue | accumulate |",
             "|---|---|---|---|---|---|---|---|"]
    for name, steps in runs(path).items():
        for p in parts(steps, k):
            lines.append(f"| {name} | {p['first']}-{p['last']} | {_f(p['gpu_ms'], '.1f')} | "
                         f"{_f(p['compute_ms'], '.1f')} | {_f(p['wait_ms'], '.1f')} | {_f(p['images_per_s'], '.0f')} | "
                         f"{_f(p['ready'], '.0f')} | {_f(p['accumulate'], '.0f')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", type=Path, help="a scenario's results folder or a run directory")
    ap.add_argument("--parts", type=int, default=5)
    a = ap.parse_args(argv)
    if not a.path.is_dir():
        print(f"step_trend: {a.path} is not a folder", file=sys.stderr)
        return 2
    if not runs(a.path):
        print(f"step_trend: no step events under {a.path}", file=sys.stderr)
        return 2
    print(table(a.path, a.parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
