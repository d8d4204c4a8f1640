"""bench/loss_start.py: per-image loss at the same images and the first optimizer step where the loss falls."""

import gzip
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import loss_start as ls

ROOT = Path(__file__).resolve().parents[2]

EVENTS = ROOT / "fixtures" / "trials" / "h200-fix-unsafe-2026-12-03e-events"
SAFE_EVENTS = ROOT / "fixtures" / "trials" / "h200-fix-safe-2026-12-04a-events"


def write(run: Path, losses, batch=64, accumulate=1, precision="fp16", gz=False, scale=None):
    run.mkdir(parents=True)
    ev = [{"type": "settings", "t": 0.0, "settings": {"batch": batch, "accumulate": accumulate,
                                                      "precision": precision, "grad_scaler": precision == "fp16"}}]
    ev += [{"type": "step", "epoch": 0, "i": i, "step": i, "n": i, "images": batch, "batch": batch,
            "accumulate": accumulate, "loss": x * batch, "compute": 0.1, "wait": 0.0} for i, x in enumerate(losses)]
    ev.append({"type": "train_end", "t": 9.0, "train_index": 0, "grad_scale": scale})
    text = "".join(json.dumps(e) + "\n" for e in ev)
    if gz:
        (run / "events.jsonl.gz").write_bytes(gzip.compress(text.encode()))
    else:
        (run / "events.jsonl").write_text(text)


def test_first_fall_and_loss_at_images(tmp_path):
    write(tmp_path / "flat", [10.0, 10.0, 10.1, 9.9, 9.7, 9.0], scale=2.0 ** 12)
    write(tmp_path / "sub" / "falls", [10.0, 9.5, 9.0, 8.0], precision="bf16", gz=True)
    write(tmp_path / "acc", [10.0, 10.0, 9.0, 9.0], batch=16, accumulate=2)
    assert [r.name for r in ls.runs_under([tmp_path])] == ["acc", "flat", "falls"]
    flat = ls.analyse(tmp_path / "flat", images=(64, 200, 384, 1000))
    assert flat["steps_before_fall"] == 4 and flat["fall_images"] == 320 and flat["grad_scaler"] is True
    assert flat["loss_at"] == {64: 10.0, 200: 10.1, 384: 9.0, 1000: None}  # 384 images is as far as it ran
    assert flat["grad_scale"] == 4096.0 and flat["skipped"] == 4  # 2**16 halved four times
    falls = ls.analyse(tmp_path / "sub" / "falls")
    assert falls["precision"] == "bf16" and falls["steps_before_fall"] == 1 and falls["opt_steps"] == 4
    assert falls["skipped"] is None  # no scaler
    # accumulate 2: one optimizer step every two micro-batches (Ultralytics starts at last_opt_step -1)
    acc = ls.analyse(tmp_path / "acc", images=(32,))
    assert acc["opt_steps"] == 2 and acc["loss_at"] == {32: 10.0} and acc["steps_before_fall"] == 1
    assert ls.analyse(tmp_path / "flat", drop=0.2)["steps_before_fall"] is None


def test_the_h200_unsafe_trials_fp16_starts_flat_where_bf16_falls_at_once(capsys):
    # fix-unsafe on the H200, 2026-12-03: at fp16 (a GradScaler) the loss first fell 2% after 10 optimizer steps of
    # batch 128 (1408 images seen); at bf16 (none) after 2 - the start that loss parity over 1920 images weighs
    b128 = ls.analyse(EVENTS / "batch_128-1")
    plan = ls.analyse(EVENTS / "plan-1")
    assert (b128["precision"], b128["grad_scaler"], b128["batch"]) == ("fp16", True, 128)
    assert (b128["steps_before_fall"], b128["fall_images"]) == (10, 1408)
    assert (plan["precision"], plan["grad_scaler"], plan["steps_before_fall"]) == ("bf16", False, 2)
    assert ls.main([str(EVENTS)]) == 0
    out = capsys.readouterr().out
    assert "batch_128-1" in out and "10 (1408)" in out and len(out.splitlines()) == 19
    assert ls.main([str(ROOT / "rules")]) == 2


def test_the_h200_safe_trials_record_how_many_optimizer_steps_the_grad_scaler_skipped():
    # fix-safe on the H200, 2026-12-04, the first trials with the recorder's train_end grad_scale: every fp16 run ended
    # at a scale of 2**9 or 2**10 - the GradScaler skipped 6 or 7 optimizer steps (none grows it before 2000 clean ones)
    rows = [ls.analyse(r) for r in ls.runs_under([SAFE_EVENTS])]
    assert len(rows) == 12 and all(r["precision"] == "fp16" and r["grad_scaler"] for r in rows)
    assert {r["grad_scale"] for r in rows} <= {2.0 ** 9, 2.0 ** 10} and {r["skipped"] for r in rows} == {6, 7}
    base = next(r for r in rows if r["run"] == "baseline-1")
    assert (base["batch"], base["accumulate"], base["steps_before_fall"]) == (16, 4, 4)
    assert all(r["steps_before_fall"] == 7 for r in rows if r["batch"] == 64)
