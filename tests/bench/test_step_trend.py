"""bench/step_trend.py: a run's steps cut into consecutive parts, each with its median step times."""

import gzip
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import step_trend

ROOT = Path(__file__).resolve().parents[2]


def _steps(n: int, gpu_ms, wait: float = 0.0) -> list[dict]:
    return [{"type": "step", "n": i, "images": 32, "wait": wait, "compute": gpu_ms(i) / 1000, "gpu_ms": gpu_ms(i),
             "ready": 10, "accumulate": 2} for i in range(n)]


def test_a_run_that_slows_along_its_steps_shows_it_part_by_part():
    steps = _steps(100, lambda i: 50.0 if i < 50 else 60.0)
    steps[10]["traced"] = True  # a traced step is no training step to time
    p = step_trend.parts(steps, 2)
    assert [(x["first"], x["last"]) for x in p] == [(0, 49), (50, 99)]  # 99 untraced steps, cut 49 / 50
    assert p[0]["gpu_ms"] == 50.0 and p[1]["gpu_ms"] == 60.0
    assert round(p[0]["images_per_s"]) == 640 and round(p[1]["images_per_s"]) == 533  # 32 / 0.05 s, 32 / 0.06 s
    assert p[0]["accumulate"] == 2 and p[0]["ready"] == 10


def test_a_scenarios_runs_are_read_from_their_kept_step_events(tmp_path, capsys):
    for name, ms in (("original", 60.0), ("profile", 50.0)):
        with gzip.open(tmp_path / f"{name}.events.jsonl.gz", "wt") as fh:
            fh.write("\n".join(json.dumps(s) for s in _steps(20, lambda i, ms=ms: ms)) + "\n")
    assert step_trend.main([str(tmp_path), "--parts", "2"]) == 0
    out = capsys.readouterr().out
    assert "| original | 0-9 | 60.0 |" in out and "| profile | 10-19 | 50.0 |" in out


def test_a_recorded_run_directory_is_read_and_a_folder_without_steps_is_refused(tmp_path, capsys):
    run = ROOT / "fixtures" / "profiles" / "h100-b128w14-cache-ram"
    p = step_trend.parts(step_trend.runs(run)[run.name], 3)
    assert len(p) == 3 and all(x["gpu_ms"] and x["images_per_s"] for x in p)
    assert step_trend.main([str(tmp_path)]) == 2 and "no step events" in capsys.readouterr().err
    assert step_trend.main([str(tmp_path / "absent")]) == 2
