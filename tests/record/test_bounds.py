"""The steady window judged from the run's own evidence: the loader queue's occupancy and the rate's stability."""

import time

from yolodoctor.profiling.recorder import endless, queued
from yolodoctor.record import bounds
from yolodoctor.record.summary import summarise


def run(ready, step_s=0.1, images=8, waits=None):
    """Step records with the given occupancy per step (None: not recorded)."""
    t, out = 0.0, []
    for i, r in enumerate(ready):
        wait = waits[i] if waits else 0.0
        s = {"type": "step", "step": i, "n": i, "t0": t + wait, "t1": t + wait + step_s, "wait": wait,
             "compute": step_s, "images": images, "loss": 1.0}
        if r is not None:
            s["ready"] = r
        out.append(s)
        t += wait + step_s
    return out


def test_a_full_queue_gpu_bound_run_is_steady_from_the_settle_steps():
    s = summarise(run([60] * 50), {"workers": 15, "prefetch_factor": 4})  # depth 60: the fixed rule wanted 200 steps
    w = s["window"]
    assert w["valid"] and w["first_step"] == bounds.SETTLE and w["evidence"] == "occupancy"


def test_a_drained_loader_bound_run_starts_its_window_once_the_queue_is_empty():
    ready = [8 - i // 4 for i in range(32)] + [0] * 30  # depth 8: empty from step 32
    s = summarise(run(ready, waits=[0.0] * 32 + [0.2] * 30), {"workers": 2, "prefetch_factor": 4})
    w = s["window"]
    assert w["valid"], w
    # the loader's rate (26.7 images/s), not the queue's (80)
    assert 28 <= w["first_step"] <= 32 and abs(s["images_per_s"] / (8 / 0.3) - 1) < 0.1


def test_a_queue_still_draining_is_invalid_and_says_how_many_steps_it_needs():
    ready = [60 - i * 0.2 for i in range(205)]  # 60 -> 19: draining 0.2 batches a step to the end
    s = summarise(run(ready), {"workers": 15, "prefetch_factor": 4})
    w = s["window"]
    assert not w["valid"] and "still draining" in w["why"]
    assert 90 <= w["needs"] <= 120, w  # ~19 batches left at 0.2 a step, plus a minimal window


def test_a_slow_drain_that_would_bias_the_rate_is_invalid_even_within_the_tolerance():
    ready = [60 - (i - 20) * 0.11 if i > 20 else 60 for i in range(105)]  # 9 batches in 84 steps: 11% from the queue
    w = summarise(run(ready), {"workers": 15, "prefetch_factor": 4})["window"]
    assert not w["valid"] and "still draining" in w["why"]
    jitter = [60 - (i % 3) for i in range(105)]  # a full queue's integer jitter is not a drain
    assert summarise(run(jitter), {"workers": 15, "prefetch_factor": 4})["window"]["valid"]


def test_a_rate_that_moves_across_the_window_is_invalid():
    t, steps = 0.0, []
    for i in range(60):
        dt = 0.1 if i < 40 else 0.2  # halves at 80 and 40 images/s
        steps.append({"type": "step", "step": i, "t0": t, "t1": t + dt, "wait": 0.0, "compute": dt, "images": 8})
        t += dt
    w = summarise(steps, {"workers": 0})["window"]
    assert not w["valid"] and "rate moved" in w["why"]


def test_records_without_occupancy_keep_the_fixed_rule():
    w = summarise(run([None] * 60), {"workers": 8, "prefetch_factor": 4})["window"]
    assert not w["valid"] and w["evidence"] == "fixed rule" and "prefetch depth of 32" in w["why"]


def test_one_off_is_the_time_to_reach_the_window_beyond_its_images_at_the_steady_rate():
    events = [{"type": "train_begin", "t": -5.0, "train_index": 0}, *run([None] * 40)]
    s = summarise(events, {"workers": 0})
    assert abs(s["one_off_s"] - 5.0) < 1e-6  # 20 steps before the window took exactly their steady time


def test_queued_counts_the_batches_a_worker_loader_holds_ready():
    import torch
    from torch.utils.data import DataLoader

    loader = DataLoader(list(range(64)), batch_size=1, num_workers=2, prefetch_factor=4)
    it = iter(loader)
    next(it)
    deadline = time.monotonic() + 20
    while queued(it) < 8 and time.monotonic() < deadline:  # 2 workers x 4 in flight, refilled after a batch is taken
        time.sleep(0.05)
    assert queued(it) == 8
    next(it)
    assert queued(it) <= 8
    assert queued(iter(DataLoader(list(range(4)), batch_size=1))) is None  # single-process: no queue
    del it, torch


def test_endless_runs_the_epoch_on_past_its_last_batch_with_full_batches_only():
    class Loader:  # the shape of Ultralytics' InfiniteDataLoader: a persistent iterator over a repeating sampler
        batch_size = 4

        def __init__(self):
            self.iterator = None

        def _get_iterator(self):
            def gen():
                while True:
                    for n in (4, 4, 2):  # 10 images: two full batches and a partial one
                        yield {"img": __import__("torch").zeros(n, 1)}
            return gen()

        def __len__(self):
            return 3

        def __iter__(self):
            if self.iterator is None:
                self.iterator = self._get_iterator()
            for _ in range(len(self)):
                yield next(self.iterator)

    plain = Loader()
    assert [b["img"].shape[0] for b in plain] == [4, 4, 2]
    loader = Loader()
    endless(loader)
    sizes = []
    for b in loader:
        sizes.append((b["img"].shape[0], loader._yd_last_n))
        if len(sizes) == 8:
            break
    assert [n for n, _ in sizes] == [4, 4, 2, 4, 4, 4, 4, 4] and all(n == m for n, m in sizes)
    assert type(plain) is Loader and len(loader) == 3  # only that instance changed; its length is the user's


def ramp_run(steps, ramp_end, accumulate=4, ramp_s=16 / 169, after_s=16 / 256, ready=32):
    """A GPU-bound run (full queue) whose accumulation ramps from 1 to ``accumulate`` by step ``ramp_end``, its
    ramp steps slower: the shape of a recorded H100 bounded profile (yolo11n, batch 16, 20 epochs of 63 batches:
    169 then 256 images/s across the ramp's end)."""
    t, out = 0.0, []
    for i in range(steps):
        dt = ramp_s if i < ramp_end else after_s
        acc = max(1, round(1 + (accumulate - 1) * i / (ramp_end + 1))) if i < ramp_end else accumulate
        out.append({"type": "step", "step": i, "n": i, "t0": t, "t1": t + dt, "wait": 0.0, "compute": dt,
                    "images": 16, "ready": ready, "accumulate": min(acc, accumulate - 1) if i < ramp_end else acc})
        t += dt
    return out


SETTINGS_RAMP = {"workers": 8, "prefetch_factor": 4, "accumulate": 4, "warmup_iterations": 189}


def test_ramp_end_is_where_ultralytics_interpolation_reaches_the_nominal_accumulation():
    import numpy as np

    for acc, nw in ((2, 94), (2, 126), (4, 189), (4, 63), (8, 125), (16, 2000), (3, 7)):
        want = next(ni for ni in range(nw + 1) if int(np.interp(ni, [0, nw], [1, acc]).round()) >= acc)
        assert bounds.ramp_end(acc, nw) == want, (acc, nw)
    assert bounds.ramp_end(1, 189) == 0 and bounds.ramp_end(4, 0) == 0 and bounds.ramp_end(None, None) == 0


def test_the_window_starts_after_the_warmups_accumulation_ramp():
    # without the ramp's evidence the halves differ by half: the recorded profile read "not settled"
    plain = summarise([{k: v for k, v in s.items() if k != "accumulate"} for s in ramp_run(303, 158)],
                      {"workers": 8, "prefetch_factor": 4})
    assert not plain["window"]["valid"] and "moved" in plain["window"]["why"]
    s = summarise(ramp_run(303, 158), SETTINGS_RAMP)
    w = s["window"]
    assert w["valid"], w
    assert w["first_step"] == 158 and "left out" in w["warmup"] and not w["in_warmup"]
    assert abs(s["images_per_s"] / 256 - 1) < 0.01  # the rate after the warm-up, not the ramp's 169


def test_a_run_that_ends_in_the_ramp_keeps_its_window_says_so_and_asks_for_the_steps_past_it():
    w = summarise(ramp_run(77, 158), SETTINGS_RAMP)["window"]  # the default bound of 8 workers: 77 steps
    assert w["valid"] and w["first_step"] == bounds.SETTLE  # the ramp alone: a steady rate, the ramp's own
    assert "warm-up" in w["warmup"] and "158" in w["warmup"] and w["in_warmup"]
    assert w["warmup_needs"] == 158 - 76 + 2 * bounds.MIN_WINDOW and w["needs"] is None  # no invalid window
    # the same without the settings' warm-up length: named, but no count of steps
    w = summarise(ramp_run(77, 158), {"workers": 8, "prefetch_factor": 4, "accumulate": 4})["window"]
    assert w["warmup"] and w["warmup_needs"] is None


def test_no_ramp_no_warmup_note():
    s = summarise(ramp_run(120, 0), SETTINGS_RAMP)  # every step at the nominal accumulation
    assert s["window"]["valid"] and s["window"]["warmup"] is None and s["window"]["first_step"] == bounds.SETTLE
    one = summarise(ramp_run(120, 50, accumulate=1), {**SETTINGS_RAMP, "accumulate": 1})  # batch >= nbs: no ramp
    assert one["window"]["warmup"] is None


def test_a_bounded_run_in_the_ramp_moves_its_bound_past_it():
    from yolodoctor.profiling.recorder import Recorder

    class Events:
        def __init__(self):
            self.written = []

        def write(self, kind, **kw):
            self.written.append((kind, kw))

    ev = Events()
    r = Recorder(ev, steps_limit=77, extend_to=308)
    r._workers, r._prefetch, r._accumulate, r._warmup = 8, 4, 4, 189
    r._timing = [{k: s[k] for k in ("n", "t0", "t1", "wait", "compute", "images", "ready", "accumulate")}
                 for s in ramp_run(77, 158)]
    r.steps = 77
    r._maybe_extend(77, 308)
    # steps 0 to 178: 21 past the ramp, the trace window's 5 among them
    assert r.steps_limit == 158 + 2 * bounds.MIN_WINDOW + 1 and ev.written[0][0] == "steps_extended"
    r2 = Recorder(Events(), steps_limit=77, extend_to=308)
    r2._workers, r2._prefetch = 8, 4  # no settings' accumulation: nothing to move the bound for
    r2._timing = r._timing
    r2._maybe_extend(77, 308)
    assert r2.steps_limit == 77
    far = Recorder(Events(), steps_limit=77, extend_to=308)  # a ramp ending at 1,250 (20 epochs of 500 batches)
    far._workers, far._prefetch, far._accumulate, far._warmup = 8, 4, 4, 1500
    far._timing = [{k: s[k] for k in ("n", "t0", "t1", "wait", "compute", "images", "ready", "accumulate")}
                   for s in ramp_run(77, 1250)]
    far._maybe_extend(77, 308)
    assert far.steps_limit == 77  # out of the bound's reach: no steps spent that cannot get past it
