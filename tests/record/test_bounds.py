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
