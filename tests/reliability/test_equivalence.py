"""Equivalence on the CPU: a training under `yolodoctor profile` (sampler on at 5 Hz, torch.profiler window on the
last 5 steps, the whole run with its validation) gives the same per-step losses and the same final weights, bit for
bit, as the same training run by plain Ultralytics.

Both runs carry the same read-only observer (observer/sitecustomize.py) that records each step's loss and, at the
end, the fp32 state of the model, its EMA and the optimizer; Ultralytics' own outputs (last.pt, best.pt,
results.csv) are compared as well. Like with like: both run the whole epoch, validation and final evaluation
included (`profile --all`).
"""

from __future__ import annotations

import json
import sys

import pytest
import torch
from reliability_support import HERE, OBSERVER, TRAIN, env, snapshot

from yolodoctor.record import profile as record
from yolodoctor.record.events import read_events

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("reliability")]  # one worker: conftest.py says why


@pytest.fixture(scope="module")
def plain(profiled, dataset):
    """The same training without yolodoctor, in its own process, same cwd and environment."""
    import subprocess

    observed = profiled.work / "observed-plain"
    observed.mkdir()
    p = subprocess.run([sys.executable, str(HERE / "plain_train.py"), *TRAIN, f"data={dataset}",
                        f"project={profiled.work / 'ul'}", "name=plain"], capture_output=True, text=True,
                       timeout=300, cwd=profiled.work,
                       env=env(PYTHONPATH=str(OBSERVER), YD_OBSERVE=str(observed)))
    assert p.returncode == 0, p.stderr[-3000:]
    return observed


def tensors_equal(a, b, where=""):
    """Bit-equal nested state (dicts, lists, tensors, numbers)."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape, where
        assert torch.equal(a, b), f"{where} differs"
        return 1
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        return sum(tensors_equal(a[k], b[k], f"{where}.{k}") for k in a)
    if isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        return sum(tensors_equal(x, y, f"{where}[{i}]") for i, (x, y) in enumerate(zip(a, b, strict=False)))
    assert a == b, f"{where}: {a!r} != {b!r}"
    return 0


def test_the_profile_measured_what_it_claims(profiled):
    """The profiled side really ran with the sampler and the trace window (else equivalence proves nothing)."""
    prof = record.load(profiled.run)
    assert prof.status == "complete" and not prof.summary["bounded"]
    assert prof.trace["steps"] == 5 and prof.trace["first_step"] == 3 and prof.trace.get("file")
    samples = [e for e in read_events(profiled.run / "samples.jsonl") if e["type"] == "sample"]
    assert len(samples) >= 5
    traced = [e["step"] for e in read_events(profiled.run / "events.jsonl") if e["type"] == "step" and e.get("traced")]
    assert traced == [3, 4, 5, 6, 7]


def test_same_losses_and_weights_with_and_without_yolodoctor(profiled, plain):
    with_yd = json.loads((profiled.observed / "losses.json").read_text())["losses"]
    without = json.loads((plain / "losses.json").read_text())["losses"]
    recorded = [e["loss"] for e in read_events(profiled.run / "events.jsonl") if e["type"] == "step"]
    assert len(without) == 8
    assert with_yd == without  # every step's loss, exactly
    assert recorded == without  # and what the profile recorded is that loss
    a = torch.load(profiled.observed / "weights.pt", weights_only=False)
    b = torch.load(plain / "weights.pt", weights_only=False)
    n = tensors_equal(a, b, "final")  # fp32 model, EMA and optimizer state (momentum buffers included)
    assert n > 1000


def test_same_ultralytics_outputs(profiled, plain):
    ul = profiled.work / "ul"
    for name in ("last.pt", "best.pt"):
        a = torch.load(ul / "profiled" / "weights" / name, weights_only=False)
        b = torch.load(ul / "plain" / "weights" / name, weights_only=False)
        tensors_equal(a["model"].state_dict(), b["model"].state_dict(), name)
        assert a["train_metrics"] == b["train_metrics"]

    def rows(run):  # results.csv without its wall-clock column
        return [line.split(",")[:1] + line.split(",")[2:] for line in (ul / run / "results.csv").read_text().split()]

    assert rows("profiled") == rows("plain")


def test_the_users_dataset_is_untouched(profiled, dataset):
    assert snapshot(dataset.parent) == profiled.dataset_before
