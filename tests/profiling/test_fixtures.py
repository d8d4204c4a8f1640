"""The recorded profiles re-read, and their streams and summaries say what the fixtures README says."""

from pathlib import Path

import pytest

from yolodoctor.record import profile as record
from yolodoctor.record.events import read_events
from yolodoctor.record.summary import summarise

PROFILES = Path(__file__).resolve().parents[2] / "fixtures" / "profiles"
ALL = sorted(p.name for p in PROFILES.iterdir() if (p / "profile.json").exists())


@pytest.mark.parametrize("name", ALL)
def test_fixture_rereads_and_its_summary_is_reproducible(name):
    run = PROFILES / name
    prof = record.load(run)
    assert prof.status == "complete"
    assert prof.settings["device"].startswith("cpu" if name.startswith("cpu-") else "cuda")
    events = list(read_events(run / "events.jsonl"))
    again = summarise(events)
    assert again["steps"] == prof.summary["steps"]
    if prof.ranks:  # DDP: the whole training's rate is the ranks' summed, each from its own stream
        from yolodoctor.record import ranks

        rows = ranks.summarise(run)
        assert [r["rank"] for r in rows] == [r["rank"] for r in prof.ranks]
        assert rows[0]["images_per_s"] == pytest.approx(again["images_per_s"], rel=1e-9)
        again["images_per_s"] = sum(r["images_per_s"] for r in rows)
    assert again["images_per_s"] == pytest.approx(prof.summary["images_per_s"], rel=1e-9)
    samples = [e for e in read_events(run / "samples.jsonl") if e["type"] == "sample"]
    assert len(samples) > 20 and all(s["gpu"] is None or "util" in s["gpu"] for s in samples)


def test_what_the_fixtures_show():
    d = record.load(PROFILES / "h200-defaults")
    assert d.summary["data_wait_share"] < 0.02 and d.loader_capacity["images_per_s"] > 2 * d.summary["images_per_s"]
    assert d.trace["summary"]["kernels_per_step"] > 1500 and d.trace["summary"]["short_kernel_share"] > 0.8
    w = record.load(PROFILES / "h200-workers0")
    assert w.settings["workers"] == 0 and w.summary["data_wait_share"] > 0.5
    f = record.load(PROFILES / "h200-fp32")
    assert f.settings["precision"] == "fp32" and f.settings["amp"] is False
    c = record.load(PROFILES / "h200-b64w16-reduce-overhead")
    assert c.settings["compile_active"] is True and "skipped" in c.trace


def test_every_fixture_states_what_its_own_steps_give():
    """Each recorded profile.json's summary is what its event stream gives under the current rules of a steady
    window (bench/rederive_fixtures.py rewrites them): no recording keeps a figure taken across a pause."""
    import subprocess
    import sys

    p = subprocess.run([sys.executable, str(PROFILES.parents[1] / "bench" / "rederive_fixtures.py"), "--check"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout
