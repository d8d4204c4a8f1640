"""How often loss parity rejects a change that changes nothing: unchanged training under other seeds, compared as
`fix --verify` compares a candidate with unchanged training.

    python bench/parity_false_rejection.py [--runs 40] [--steps 60]

Trains ``--runs`` bounded runs of one small CPU training (a synthetic dataset, yolo11n.yaml, imgsz 64, batch 8, 3
epochs: the measured steps are epoch 0's, in warm-up), identical but for the seed, and reads each run's loss per
optimizer step as the trials do. Then, for 20 comparisons each:

  - unsafe, 2+2: the reference is two runs (a baseline's two repeats, another seed each), the "candidate" two more;
  - unsafe, 4+2: the reference is four runs (the baseline and one training-equivalent candidate);
  - breakage, 4+2: the training-equivalent check (leave-one-out reference, SAFE_FLOOR, broken beyond BROKEN x band);
  - curve only, 1+1: one run against one, the band from the curves' own scatter (what parity falls back to with a
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

COMPARISONS = 20


def train(out: Path, runs: int, steps: int) -> list[list[tuple[int, float]]]:
    from yolodoctor.datasets.synth import make_dataset
    from yolodoctor.fixing.trials import _loss_curve
    from yolodoctor.profiling.runner import run_profile

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
            run_profile({"data": str(data / "data.yaml"), "model": "yolo11n.yaml", "imgsz": 64, "batch": 8,
                         "epochs": 3, "seed": seed, "plots": False, "project": str(out / "ul"), "name": f"s{seed}",
                         "exist_ok": True}, steps=steps, out=run, trace=False, loader_seconds=0, hz=0)
        curves.append(_loss_curve(run) or [])
        print(f"seed {seed}: {len(curves[-1])} optimizer steps", file=sys.stderr)
    return curves


def rates(curves: list[list[tuple[int, float]]]) -> dict[str, dict]:
    from yolodoctor.fixing.parity import BROKEN, SAFE_FLOOR, parity

    n = len(curves)

    def at(i: int) -> list[tuple[int, float]]:
        return curves[i % n]

    out: dict[str, dict] = {}
    designs = {
        "unsafe, 2+2": lambda i: (parity([at(2 * i), at(2 * i + 1)], [at(2 * i + 2), at(2 * i + 3)]), "within"),
        "unsafe, 4+2": lambda i: (parity([at(2 * i + k) for k in range(4)], [at(2 * i + 4), at(2 * i + 5)]),
                                  "within"),
        "breakage, 4+2": lambda i: (parity([at(2 * i + k) for k in range(4)], [at(2 * i + 4), at(2 * i + 5)],
                                           floor=SAFE_FLOOR), "broken"),
        "curve only, 1+1": lambda i: (parity([at(2 * i)], [at(2 * i + 1)]), "within"),
    }
    for name, f in designs.items():
        rejected, bands, rels, compared = 0, [], [], 0
        for i in range(COMPARISONS):
            p, key = f(i)
            if p is None:
                continue
            compared += 1
            bad = (p["rel"] > BROKEN * p["band"]) if key == "broken" else not p["within"]
            rejected += bad
            bands.append(p["band"])
            rels.append(p["rel"])
        out[name] = {"compared": compared, "rejected": rejected, "rate": rejected / compared if compared else None,
                     "band_median": sorted(bands)[len(bands) // 2] if bands else None,
                     "rel_abs_max": max(map(abs, rels)) if rels else None}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--work", type=Path, default=Path("bench/out/parity-false-rejection"))
    ap.add_argument("--out", type=Path, default=Path("bench/results/parity-false-rejection.json"))
    a = ap.parse_args(argv)
    os.environ.setdefault("YOLO_OFFLINE", "1")
    a.work.mkdir(parents=True, exist_ok=True)
    curves = train(a.work, a.runs, a.steps)
    res = {"runs": a.runs, "steps": a.steps, "comparisons": COMPARISONS, "designs": rates(curves),
           "curve_points": [len(c) for c in curves]}
    a.out.write_text(json.dumps(res, indent=1))
    print("| comparison | compared | falsely rejected | rate | median band | largest difference |")
    print("|---|---|---|---|---|---|")
    for name, d in res["designs"].items():
        rate = f"{d['rate']:.0%}" if d["rate"] is not None else "-"
        print(f"| {name} | {d['compared']} | {d['rejected']} | {rate} | {d['band_median']:.1%} | "
              f"{d['rel_abs_max']:.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
