"""fix --apply on a multi-GPU (DDP) training relaunches it the way Ultralytics launched it: the same devices, the
workers per rank, the ranks followed through the injected hooks. On the CPU, through the launch it builds."""

import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_apply_relaunches_a_two_gpu_training_on_the_same_devices(tmp_path, monkeypatch, capsys):
    import yolodoctor.profiling.runner as runner
    from yolodoctor.cli import main

    run = tmp_path / "ddp-workers0"
    shutil.copytree(ROOT / "fixtures/profiles/h200-workers0", run)
    prof = json.loads((run / "profile.json").read_text())
    two = json.loads((ROOT / "fixtures/profiles/cpu-ddp2-balanced/profile.json").read_text())["ranks"]
    prof["args"]["device"] = "0,1"
    prof["ranks"] = [dict(r, workers=0.0, wait_s_median=prof["summary"]["wait_s_median"]) for r in two]
    (run / "profile.json").write_text(json.dumps(prof))
    launched = []

    def popen(argv, **kw):  # the launch as built; no GPU here, so it stops at once
        launched.append((argv, kw["env"]))
        raise OSError(19, "no GPU on this machine")

    monkeypatch.setattr(runner.subprocess, "Popen", popen)
    with pytest.raises(SystemExit) as stop:
        main(["fix", str(run), "--apply", "--yes", "--json"])
    assert stop.value.code == 2 and "cannot run" in capsys.readouterr().err
    argv, env = launched[0]
    assert argv[1:3] == ["-m", "yolodoctor.profiling.child"]
    spec = json.loads((Path(argv[3]) / "spec.json").read_text())
    assert spec["args"]["device"] == "0,1" and spec["ddp"] is True  # Ultralytics launches the same two ranks
    # DL201 plans workers per rank: each rank's loader feeds half the batch (the one-GPU plan of this run says 5)
    single = json.loads((ROOT / "fixtures/profiles/h200-workers0/expected-findings.json").read_text())
    assert next(f for f in single if f["id"] == "DL201")["fix"]["args"]["workers"] == 5
    assert spec["args"]["workers"] == 3
    inject = str(ROOT / "yolodoctor" / "profiling" / "inject")
    assert env["PYTHONPATH"].split(":")[0] == inject  # each rank loads the hooks, as a script's would
    assert env["YOLODOCTOR_RUN_DIR"] == argv[3]


def test_a_single_gpu_training_is_launched_in_process_as_before(tmp_path, monkeypatch):
    import yolodoctor.profiling.runner as runner

    launched = []

    def popen(argv, **kw):
        launched.append((argv, kw["env"]))
        raise OSError(19, "stop here")

    monkeypatch.setattr(runner.subprocess, "Popen", popen)
    for device, ddp in (("0", False), ("0,1", True), ("-1,-1", True), ("cpu", False)):
        try:
            runner.run_profile({"model": "yolo11n.yaml", "device": device}, out=tmp_path / f"r{device}",
                              measure=runner.Measurement(hz=0))
        except Exception as e:
            assert "cannot run" in str(e)
        spec = json.loads((tmp_path / f"r{device}" / "spec.json").read_text())
        assert spec["ddp"] is ddp
        assert ("inject" in launched[-1][1]["PYTHONPATH"].split(":")[0]) is ddp


def _stream(path, *records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_the_launchers_failure_is_the_runs_reason_and_its_start_counts_in_the_phases(tmp_path):
    from yolodoctor.profiling import runner
    from yolodoctor.record import profile as record

    run = tmp_path / "run"
    run.mkdir()
    # Ultralytics' launcher ran, no rank ever wrote: the launch's own error is why the run is incomplete
    _stream(run / "events-launcher.jsonl", {"type": "run_start", "t": 1.0, "launcher": True},
            {"type": "imported", "t": 3.0}, {"type": "model_built", "t": 3.5},
            {"type": "run_end", "t": 9.0, "status": "incomplete",
             "reason": "crashed: CalledProcessError: Command '['python', '-m', 'torch.distributed.run']' returned 1"})
    prof = runner.finalise(run, record.Profile(), 1, span=(0.5, 10.0))
    assert prof.status == "incomplete" and "torch.distributed.run" in prof.reason
    assert prof.summary["phases"]["imports"] == 2.0 and prof.summary["phases"]["model"] == 0.5
    # the ranks trained and ended complete, and so did the launcher: complete
    _stream(run / "events.jsonl", {"type": "run_start", "t": 4.0, "rank": 0},
            {"type": "run_end", "t": 8.0, "status": "complete"})
    _stream(run / "events-launcher.jsonl", {"type": "run_start", "t": 1.0},
            {"type": "run_end", "t": 9.0, "status": "complete"})
    assert runner.finalise(run, record.Profile(), 0).status == "complete"
