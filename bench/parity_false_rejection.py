"""How often loss parity rejects a change that changes nothing: unchanged training under other seeds, compared as
`fix --verify` compares a candidate with unchanged training.

    python bench/parity_false_rejection.py [--runs 40] [--steps 60] [--batch 8] [--nbs 64]

Trains ``--runs`` bounded runs of one small CPU training (a synthetic dataset, yolo11n.yaml, imgsz 64, --batch and
--nbs, 3 epochs: the measured steps are epoch 0's, in warm-up), identical but for the seed, and reads each run's loss
per optimizer step as the trials do. Then, over 1,000 random draws of distinct runs, and over the disjoint comparisons
the runs allow (20 seed pairs for 1+1 at 40 runs):

  - unsafe, 2+2: the reference is two runs (a baseline's two repeats, another seed each), the "candidate" two more;
  - unsafe, 4+2: the reference is four runs (the baseline and one training-equivalent candidate);
  - breakage, 4+2: the training-equivalent check (leave-one-out reference, SAFE_FLOOR, broken beyond BROKEN x band);
  - unsafe, 1+1: one run against one, the band from the curves' own scatter (what parity falls back to with a
    single reference run, and what same-seed repeats amount to).

Every "candidate" is unchanged training, so every rejection is false. The runs go to --work (resumable: runs
already recorded are reused), the rates to --out and a table to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DRAWS = 1000


def train(out: Path, runs: int, steps: int, batch: int = 8, nbs: int = 64) -> list[list[tuple[int, float]]]:
    from yolodoctor.datasets.synth import make_dataset
    from yolodoctor.fixing.trials import _loss_curve
    from yolodoctor.profiling.runner import Measurement, run_profile

    data = out / "data"
    if not (data / "data.yaml").exists():
        make_dataset(data, images=200, val_images=4, width=160, height=120, workers=1)
    curves = []
    for seed in range(runs):
        run = out / f"seed-{seed}"
        if not (run / "profile.json").exists() or json.loads((run / "profile.json").read_text()).get("status") != \
                "complete":
            if run.exists():
                import shutil

                shutil.rmtree(run)
            run_profile({"data": str(data / "data.yaml"), "model": "yolo11n.yaml", "imgsz": 64, "batch": batch,
                         "nbs": nbs, "epochs": 3, "seed": seed, "plots": False, "project": str(out / "ul"),
                         "name": f"s{seed}", "exist_ok": True},
                        out=run, measure=Measurement(steps=steps, trace=False, loader_seconds=0, hz=0))
        curves.append(_loss_curve(run) or [])
        print(f"seed {seed}: {len(curves[-1])} optimizer steps", file=sys.stderr)
    return curves


def rates(curves: list[list[tuple[int, float]]], draws: int = DRAWS) -> dict[str, dict]:
    """Each design's false-rejection rate over ``draws`` random draws of distinct runs (seeded, so re-running gives
    the same draws), with a 95% Wilson interval, and over the disjoint comparisons the runs allow."""
    import random

    from yolodoctor.fixing.parity import BROKEN, SAFE_FLOOR, parity

    designs = {"unsafe, 2+2": (2, 2, "within", None), "unsafe, 4+2": (4, 2, "within", None),
               "breakage, 4+2": (4, 2, "broken", SAFE_FLOOR), "unsafe, 1+1": (1, 1, "within", None)}
    out: dict[str, dict] = {}
    rnd = random.Random(0)
    usable = [i for i, c in enumerate(curves) if c]
    for name, (k, m, key, floor) in designs.items():
        picks = [rnd.sample(usable, k + m) for _ in range(draws)]
        disjoint = [usable[j:j + k + m] for j in range(0, len(usable) - k - m + 1, k + m)]
        res = {}
        for label, sets in (("random", picks), ("disjoint", disjoint)):
            rejected, compared, bands = 0, 0, []
            for idx in sets:
                kw = {"floor": floor} if floor is not None else {}
                p = parity([curves[i] for i in idx[:k]], [curves[i] for i in idx[k:]], **kw)
                if p is None:
                    continue
                compared += 1
                rejected += (p.rel > BROKEN * p.band) if key == "broken" else not p.within
                bands.append(p.band)
            res[label] = {"compared": compared, "rejected": rejected,
                          "rate": rejected / compared if compared else None,
                          "interval": wilson(rejected, compared),
                          "band_median": sorted(bands)[len(bands) // 2] if bands else None}
        out[name] = res
    return out


def wilson(k: int, n: int, z: float = 1.96) -> list[float] | None:
    if not n:
        return None
    p = k / n
    mid, half = (p + z * z / (2 * n)) / (1 + z * z / n), z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5 / (
        1 + z * z / n)
    return [max(0.0, mid - half), min(1.0, mid + half)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--nbs", type=int, default=64, help="nominal batch: batch/nbs sets the optimizer steps per batch")
    ap.add_argument("--work", type=Path, default=None, help="[default: bench/out/parity-false-rejection-bB-nN]")
    ap.add_argument("--out", type=Path, default=None,
                    help="[default: bench/results/parity-false-rejection-bB-nN.json]")
    a = ap.parse_args(argv)
    os.environ.setdefault("YOLO_OFFLINE", "1")
    tag = f"b{a.batch}-n{a.nbs}"
    a.work = a.work or Path(f"bench/out/parity-false-rejection-{tag}")
    a.out = a.out or Path(f"bench/results/parity-false-rejection-{tag}.json")
    a.work.mkdir(parents=True, exist_ok=True)
    curves = train(a.work, a.runs, a.steps, a.batch, a.nbs)
    res = {"runs": a.runs, "steps": a.steps, "batch": a.batch, "nbs": a.nbs, "draws": DRAWS, "designs": rates(curves),
           "optimizer_steps_per_run": sorted({len(c) for c in curves})}
    a.out.write_text(json.dumps(res, indent=1))
    print("| comparison | random draws: falsely rejected | 95% interval | disjoint: falsely rejected | median band |")
    print("|---|---|---|---|---|")
    for name, d in res["designs"].items():
        r, j = d["random"], d["disjoint"]
        if not r["compared"]:
            print(f"| {name} | not comparable (fewer than 3 optimizer steps of a run in the window) | | | |")
            continue
        print(f"| {name} | {r['rejected']} of {r['compared']} ({r['rate']:.1%}) | {r['interval'][0]:.1%}-"
              f"{r['interval'][1]:.1%} | {j['rejected']} of {j['compared']} | {r['band_median']:.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
