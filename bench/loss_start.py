"""How the loss starts in trial runs: per-image loss at the same images, and how many optimizer steps pass before it
first falls.

    python bench/loss_start.py RUN_DIR_OR_FOLDER ... [--images 256 512 1024 1536 1920] [--drop 0.02]

For every run directory found (events.jsonl or events.jsonl.gz), from its step events: the precision, the batch and
accumulate, and whether a GradScaler ran (its settings record); the mean per-image loss of the optimizer step at or
just before each image count (fixing/parity.opt_points, as loss parity reads it); and how many optimizer steps had
been taken when the loss first fell --drop below the first step's (a step's loss is computed with the weights of the
steps before it), with the images seen by then. `fix --verify` judged loss parity over the images its shortest
trial saw (1920 in the H200 trials: the baseline's 120 steps of batch 16) until the safe trials, which reach
further, joined its reference; a configuration whose loss stays flat for its first optimizer steps loses more images
to that start the larger its batch. An fp16 GradScaler starts at a scale of 2**16 and skips every optimizer step whose
gradients overflow while it halves the scale (torch.amp), which would look like this; bf16 runs none. "skipped": the
steps it skipped, 16 - log2 of its scale at the end of training (the recorder's train_end grad_scale; runs recorded
before it show "-").
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from yolodoctor.fixing.parity import opt_points
from yolodoctor.record.events import read_events
from yolodoctor.record.summary import settings_of, steps_of

sys.path.insert(0, str(Path(__file__).resolve().parent))
from window_noise import runs_under

IMAGES = (256, 512, 1024, 1536, 1920)


def analyse(run: Path, images=IMAGES, drop: float = 0.02) -> dict:
    events = list(read_events(run / "events.jsonl"))
    st = settings_of(events) or {}
    steps = sorted((s for s in steps_of(events) if s.get("train_index", 0) == 0), key=lambda s: s["step"])
    pts = opt_points(steps)
    at = {}
    for n in images:  # the step at or just before n, where the run reached n
        before = [y for x, y in pts if x <= n]
        at[n] = before[-1] if before and pts[-1][0] >= n else None
    end = next((e for e in events if e.get("type") == "train_end" and e.get("train_index", 0) == 0), {})
    scale = end.get("grad_scale")  # recorded since the recorder writes it; older runs: None
    first_fall = next((i for i, (_, y) in enumerate(pts) if pts and y <= (1 - drop) * pts[0][1]), None)
    return {"run": run.name, "precision": st.get("precision"), "grad_scaler": st.get("grad_scaler"),
            "batch": st.get("batch"), "accumulate": st.get("accumulate"), "opt_steps": len(pts),
            "loss_at": at, "steps_before_fall": first_fall,
            "fall_images": pts[first_fall][0] if first_fall is not None else None, "grad_scale": scale,
            # halvings from the initial 2**16, each a skipped optimizer step (no growth before 2000 clean steps)
            "skipped": round(16 - math.log2(scale)) if scale and len(pts) < 2000 else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--images", nargs="+", type=int, default=list(IMAGES))
    ap.add_argument("--drop", type=float, default=0.02, help="the fall that counts, relative to the first step's loss")
    a = ap.parse_args(argv)
    runs = runs_under(a.paths)
    if not runs:
        print("no run directory (events.jsonl) under " + " ".join(map(str, a.paths)), file=sys.stderr)
        return 2
    print(f"{'run':48s} {'prec':5s} {'scaler':6s} {'batch':>5s} {'acc':>3s} "
          + " ".join(f"{n:>6d}" for n in a.images) + f"  steps before a {a.drop:.0%} fall (images)  skipped")
    folder = None
    for run in runs:
        if run.parent != folder and len({r.parent for r in runs}) > 1:
            folder = run.parent
            print(f"{folder}:")
        r = analyse(run, a.images, a.drop)
        loss = " ".join(f"{r['loss_at'][n]:6.2f}" if r["loss_at"][n] is not None else f"{'-':>6s}" for n in a.images)
        fall = (f"{r['steps_before_fall']} ({r['fall_images']})" if r["steps_before_fall"] is not None
                else f"none in {r['opt_steps']}")
        print(f"{r['run'][:48]:48s} {r['precision']!s:5s} {r['grad_scaler']!s:6s} {r['batch'] or '-':>5} "
              f"{r['accumulate'] or '-':>3} {loss}  {fall:32s}  {r['skipped'] if r['skipped'] is not None else '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
