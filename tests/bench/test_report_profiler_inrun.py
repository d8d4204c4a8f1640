"""bench/report_profiler_inrun.py on synthetic runs: blocks are labelled by the sampler's state and the ratio, its
bootstrap interval and the permutation noise floor tell a real effect from none."""

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import report_profiler_inrun as rep

ROOT = Path(__file__).resolve().parents[2]


def synthetic_run(slowdown: float, seed: int, blocks: int = 10, block_s: float = 3.0, step_s: float = 0.07,
                  noise: float = 0.02) -> dict:
    """Steps of step_s (+- noise), slower by `slowdown` while the sampler samples; it switches every block_s."""
    rng = random.Random(seed)
    switches = [[block_s * k, k % 2 == 0] for k in range(1, blocks)]  # on, off, on, ... from t=0
    t, t1 = 0.0, []
    while t < block_s * blocks:
        on = int(t // block_s) % 2 == 0
        t += step_s * (1 + (slowdown if on else 0)) * (1 + rng.uniform(-noise, noise))
        t1.append(t)
    return {"t1": t1, "start": 0.0, "switches": switches}


def test_blocks_are_labelled_by_the_sampler_state_and_skip_straddling_steps():
    run = synthetic_run(0.5, seed=1, blocks=4)
    b = rep.blocks(run, first=1, tail=1)
    assert [s for s, _ in b] == [True, False, True, False]
    on = [m for s, m in b if s]
    off = [m for s, m in b if not s]
    assert min(on) > 1.4 * max(off)


def test_a_real_slowdown_is_outside_the_noise_floor():
    groups = [rep.blocks(synthetic_run(0.10, seed=s), first=5, tail=2) for s in range(3)]
    e = rep.effect(groups, draws=500)
    assert 1.08 < e["ratio"] < 1.12 and e["ci95"][0] > 1.05
    assert e["ratio"] > e["null95"][1]


def test_no_effect_stays_inside_the_noise_floor():
    groups = [rep.blocks(synthetic_run(0.0, seed=s, noise=0.2), first=5, tail=2) for s in range(3)]
    e = rep.effect(groups, draws=500)
    assert e["null95"][0] <= e["ratio"] <= e["null95"][1]
    assert e["ci95"][0] < 1.0 < e["ci95"][1]
