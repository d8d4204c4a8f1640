"""bench/trial_fixture.py: a recorded trial set from the benchmark's results and unpacked logs, as a fixture."""

import gzip
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import trial_fixture as tf

ROOT = Path(__file__).resolve().parents[2]


def events(n=40, batch=16, compute=0.05, wait=0.01):
    ev = [{"type": "settings", "t": 0.0, "settings": {"batch": batch, "workers": 1, "prefetch_factor": 1}}]
    ev += [{"type": "step", "epoch": 0, "i": i, "step": i, "n": i, "images": batch, "batch": batch, "accumulate": 1,
            "compute": compute, "wait": wait, "loss": 2.0 * batch, "t0": i * 0.1, "t1": i * 0.1 + compute}
           for i in range(n)]
    return "".join(json.dumps(e) + "\n" for e in ev)


def test_build_writes_the_trials_with_their_steady_steps_and_gzipped_events(tmp_path):
    run = {"candidate": "baseline", "rep": 0, "run_dir": "baseline-1", "status": "complete", "reason": None,
           "images_per_s": 200.0, "window_valid": True, "mismatch": [], "host_ms": 13.0, "phases": {"total_s": 1}}
    fix = {"machine": {"machine_id": "abc", "gpu": "NVIDIA H200"}, "finished": "2026-12-04 19:31", "max_reps": 2,
           "plan": [], "dropped": [], "findings": ["LA201"],
           "profile": {"facts": {"gpu.util_mean": 40.0}, "settings": {"batch": 16, "other": 1}},
           "trials": {"runs": [run], "verdicts": []}, "kept": {}, "applied": {"args": {}}}
    res = tmp_path / "results"
    res.mkdir()
    (res / "fix-unsafe.json").write_text(json.dumps({"units": {"fix": fix}}))
    logs = tmp_path / "logs" / "bench" / "out" / "h200" / "fix-unsafe" / "run" / "trials-profile" / "baseline-1"
    logs.mkdir(parents=True)
    (logs / "events.jsonl").write_text(events())
    out = tmp_path / "fx"
    out.mkdir()
    path = tf.build("fix-unsafe", tmp_path / "logs", res, out, "made here")
    doc = json.loads(path.read_text())
    assert path.name == "h200-fix-unsafe-2026-12-04.json" and doc["source"] == "made here" and doc["max_reps"] == 2
    r = doc["trials"]["runs"][0]
    assert "phases" not in r and r["steady_compute_ms_median"] == 50.0
    assert r["steady_wait_share"] == pytest.approx(0.01 / 0.06, abs=1e-4)
    assert doc["profile_settings"]["batch"] == 16 and "other" not in doc["profile_settings"]
    gz = out / "h200-fix-unsafe-2026-12-04-events" / "baseline-1" / "events.jsonl.gz"
    assert gzip.decompress(gz.read_bytes()).decode() == events()
    first = gz.read_bytes()
    tf.build("fix-unsafe", tmp_path / "logs", res, out, "made here")
    assert gz.read_bytes() == first  # made again, the same bytes
    # a trial whose events are not in the logs: said, not written half
    (logs / "events.jsonl").unlink()
    with pytest.raises(SystemExit, match="baseline-1"):
        tf.build("fix-unsafe", tmp_path / "logs", res, out, "")


def test_main_says_what_it_cannot_read_in_one_line_and_exits_2(tmp_path, capsys):
    assert tf.main(["fix-unsafe", str(tmp_path), "--results", str(tmp_path / "none"), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cannot read the fix-unsafe record" in err
