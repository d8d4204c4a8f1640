"""Fixtures of the reliability tests: a tiny deterministic dataset, and one profiled CPU training that several modules
reuse (the equivalence test compares it with the same training without yolodoctor, the fault tests replay it with
`fix --apply`, the safety tests feed it to diagnose/fix/compare with hostile contents). Helpers: reliability_support.py.

Under pytest-xdist the test modules here run on one worker, in order (xdist_group "reliability"): the profiled
training is made once, and test_fuzz.py's last test counts the cases its properties ran in that same process.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # reliability_support, importable by the test modules

from reliability_support import OBSERVER, TRAIN, snapshot, yd


@pytest.fixture(scope="session")
def dataset(tmp_path_factory) -> Path:
    """32 train + 4 val JPEGs, 128x96, three classes; returns data.yaml."""
    from yolodoctor.datasets.synth import make_dataset

    info = make_dataset(tmp_path_factory.mktemp("reliability-ds") / "ds", images=32, val_images=4, width=128,
                        height=96, workers=1)
    return Path(info.yaml_path)


@dataclass
class Profiled:
    run: Path  # the run directory
    work: Path  # cwd of the command, with the Ultralytics project (ul/) in it
    observed: Path  # what the observer recorded (losses.json, weights.pt)
    proc: subprocess.CompletedProcess
    dataset_before: dict[str, str]


@pytest.fixture(scope="session")
def profiled(dataset, tmp_path_factory) -> Profiled:
    """`yolodoctor profile` of the whole training (--all: sampler on at 5 Hz, trace window on the last 5 steps,
    validation included), with the observer attached."""
    work = tmp_path_factory.mktemp("profiled")
    observed = work / "observed"
    observed.mkdir()
    before = snapshot(dataset.parent)
    run = work / "runs" / "prof"
    p = yd("profile", *TRAIN, f"data={dataset}", f"project={work / 'ul'}", "name=profiled", "--all",
           "--loader-seconds", "1", "--out", run, "--json", cwd=work,
           extra_env={"PYTHONPATH": str(OBSERVER), "YD_OBSERVE": str(observed)})
    assert p.returncode == 0, p.stderr[-3000:]
    return Profiled(run, work, observed, p, before)
