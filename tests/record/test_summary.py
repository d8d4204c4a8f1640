from yolodoctor.record import bounds
from yolodoctor.record.summary import summarise


def steps(n, wait=0.01, compute=0.1, images=8):
    t, out = 0.0, []
    for i in range(n):
        t0 = t + wait
        out.append({"type": "step", "step": i, "t0": t0, "t1": t0 + compute, "wait": wait, "compute": compute,
                    "images": images, "loss": 1.0})
        t = t0 + compute
    return out


def test_default_steps_rule():
    assert bounds.default_steps(0) == bounds.MIN_STEPS + 5
    assert bounds.default_steps(8) == bounds.SETTLE + 32 + 2 * bounds.MIN_WINDOW + 5
    assert bounds.default_steps(15) == 105  # the old fixed rule asked 205: the occupancy says when more are needed
    assert bounds.max_steps(15) == 420 and bounds.max_steps(0) == 4 * (bounds.MIN_STEPS + 5)
    assert all(bounds.max_steps(w) >= bounds.SETTLE + 3 * bounds.prefetch_depth(w) + 5 for w in range(33))
    assert bounds.window_start(8) == bounds.SETTLE + 32


def test_steady_rate_and_shares():
    s = summarise(steps(40), {"workers": 0})
    assert s["steps"] == 40 and s["images"] == 320
    assert abs(s["images_per_s"] - 8 / 0.11) < 0.01
    assert abs(s["data_wait_share"] - 0.01 / 0.11) < 1e-6
    assert s["window"]["valid"] and s["window"]["first_step"] == bounds.SETTLE


def test_window_shorter_than_queue_is_invalid():
    s = summarise(steps(60), {"workers": 8, "prefetch_factor": 4})  # depth 32: window must start at step 52
    assert not s["window"]["valid"] and "prefetch depth of 32" in s["window"]["why"]


def test_nonfinite_loss_flagged_and_empty_events():
    ev = steps(30)
    ev[25]["loss"] = None
    ev[26]["loss"] = "inf"
    assert summarise(ev, {})["loss_finite"] is False
    assert summarise([], {}) == {"steps": 0, "images": 0}
