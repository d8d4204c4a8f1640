"""bench/window_noise.py: windows of step time, and the within-run spread of a recorded H200 profile."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import window_noise as wn

ROOT = Path(__file__).resolve().parents[2]


def step(i, images=8, compute=0.5, wait=0.0):
    return {"step": i, "n": i, "images": images, "compute": compute, "wait": wait}


def test_windows_cut_step_time_into_consecutive_lengths():
    steps = [step(i) for i in range(5)] + [step(5, compute=1.0, wait=1.0)]
    assert wn.windows(steps, 1.0) == [16.0, 16.0, 16 / 2.5]  # the last window holds the half step and the slow one
    assert wn.windows(steps[:5], 1.0) == [16.0, 16.0]  # a last window shorter than 1 s is dropped
    assert wn.windows(steps, 10.0) == []


def test_a_recorded_h200_profile_has_little_spread_within_the_run(tmp_path, capsys):
    run = ROOT / "fixtures/profiles/h200-b64w16-reduce-overhead"
    assert wn.runs_under([run.parent]).count(run) == 1
    r = wn.analyse(run, (1.0, 4.0))
    # the window as profile.json states it: steps 84-124 and 189-211, the validation and epoch 1's 64 refilled
    # steps left out
    assert r["steps"] == 64 and 850 < r["rate"] < 1000
    assert r["by_window"][1.0]["n"] >= 4 and 4.0 not in r["by_window"]  # 4.5 s: too few for two 4-s windows
    assert r["by_window"][1.0]["cv"] < 0.1  # CUDA graphs: steady to a few per cent within the run
    p10, p50, p90 = r["compute_s"]  # the step's own time, data wait left out
    assert p10 <= p50 <= p90 and 0.05 < p50 < 0.09  # batch 64 at ~900 img/s: ~70 ms a step
    assert wn.main([str(run), "--seconds", "1"]) == 0
    assert "h200-b64w16-reduce-overhead | 64 |" in capsys.readouterr().out
    assert wn.main([str(tmp_path)]) == 2
