"""Golden tests, pylint-functional style: every recorded profile in fixtures/profiles has the findings it must
produce next to it (expected-findings.json). Any difference fails; YOLODOCTOR_UPDATE_GOLDEN=1 rewrites them."""

import json
import os
from pathlib import Path

import pytest

from yolodoctor.diagnosis.diagnose import diagnose

PROFILES = Path(__file__).resolve().parents[2] / "fixtures" / "profiles"
RUNS = sorted(p for p in PROFILES.iterdir() if (p / "profile.json").exists())


def snapshot(run: Path) -> list[dict]:
    d = diagnose(run)
    return [{"id": f.id, "severity": f.severity.name, "message": f.message,
             "fix": None if f.fix is None else {k: v for k, v in f.fix.to_dict().items() if v not in ({}, None)}}
            for f in d.findings]


@pytest.mark.parametrize("run", RUNS, ids=[r.name for r in RUNS])
def test_golden(run):
    got = snapshot(run)
    path = run / "expected-findings.json"
    if os.environ.get("YOLODOCTOR_UPDATE_GOLDEN"):
        path.write_text(json.dumps(got, indent=2) + "\n")
    assert path.exists(), f"no {path.name}: run with YOLODOCTOR_UPDATE_GOLDEN=1 and review it"
    assert got == json.loads(path.read_text())


def test_primary_findings_match_what_the_data_shows():
    first = {r.name: snapshot(r)[0]["id"] for r in RUNS}
    assert first["h200-workers0"] == "DL201"  # data wait 70%, 16 idle cores
    assert first["h200-defaults"] == "LA201"  # GPU 17% busy with data ready: host-bound, not the loader
    assert first["h200-fp32"] == "LA201"  # host-bound first; AMP off is real but can only speed up the busy 27%
    assert "PR201" in [f["id"] for f in snapshot(PROFILES / "h200-fp32")]
    # the scenarios recorded after the rules were frozen (BENCHMARKS.md has what the frozen rules said)
    assert first["h200-png-1080p"] == "DL204"  # 61% wait, 82 ms to decode a 1080p PNG: cache='ram'
    assert first["cpu-classify-png-decode"] == "DL204"  # classification: full-resolution cache fits, 16 ms decode
    assert first["h200-b128w16-cpu-saturated"] == "DL205"  # no wait, but 16 workers starve the training thread
    assert first["h200-yolo11x-autobatch90"] == "RN201"  # 50 steps cannot outlast 32 prefetched batches
    assert "MM204" not in [f["id"] for f in snapshot(PROFILES / "h200-yolo11x-autobatch90")]


def test_oom_halving_reports_the_batch_that_ran_on_recorded_gpu_runs():
    def message(run, rule):
        return next(f["message"] for f in snapshot(PROFILES / run) if f["id"] == rule)

    # yolo11x at 1280 in float32 ran out of memory at batch 16 on an 80 GB card; Ultralytics halved it to 8
    assert "batch 8 ran, not the 16" in message("h100-yolo11x-1280-fp32-oom", "MM205")
    # AutoBatch at 95% chose 37, which ran out of memory and was halved: its estimate is not judged on batch 18
    ids = [f["id"] for f in snapshot(PROFILES / "h100-yolo11l-1280-autobatch95")]
    assert "batch 18 ran, not the 37" in message("h100-yolo11l-1280-autobatch95", "MM205")
    assert "MM208" not in ids
    # cache='ram' fits on that host: the cache ran, and its side effect on mosaic is named
    assert "DL207" in [f["id"] for f in snapshot(PROFILES / "h100-b128w14-cache-ram")]
