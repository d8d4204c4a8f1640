"""Faults injected into real CPU trainings, each survived: a readable profile marked with the reason, one clear
message, the user's files untouched.

Already covered elsewhere (not repeated here):
  - a training that cannot start (model=no-such-model.yaml) and SIGINT/SIGTERM to `profile`:
    tests/profiling/test_profile_e2e.py (test_crash_is_recorded_incomplete, test_signal_leaves_incomplete_profile);
  - OOM, NaN and a crash inside a `fix --verify` trial, and `fix --apply` rolling back after an OOM:
    tests/fixing/test_trials.py;
  - the NVML library missing (pynvml present, libnvidia-ml absent: every CPU end-to-end test runs so) and NVML calls
    failing one by one: tests/api/test_nvml.py, tests/profiling/test_sampler.py;
  - a sampler or training killed with SIGKILL mid-write: tests/profiling/test_sampler.py.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys

import pytest
from reliability_support import HERE, ROOT, env, has_step, one_line_error, snapshot, wait_for, yd, yd_popen

from yolodoctor.record import profile as record
from yolodoctor.record.events import read_events

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("reliability")]  # one worker: conftest.py says why

# YD_TEST_FAULT (tests/seams/sitecustomize.py) -> reason prefix, finding the profile command prints, the child's
# exit code
FAULTS = {
    "oom@3": ("out-of-memory", "MM201", 1),  # a CUDA-style OOM raised inside the training loop
    "crash@3": ("crashed", "ST204", 1),  # a generic exception inside the training loop
    "nan@3": ("nan", "ST203", 0),  # the loss turns NaN; training goes on to its bound
}


NVML_PATH = os.pathsep.join([str(HERE / "fake_nvml"), str(ROOT / "tests")])
SEAM_PATH = str(ROOT / "tests" / "seams")


def _can_unshare() -> bool:
    """A private mount namespace where a small tmpfs can be mounted (root, or unprivileged user namespaces)."""
    if not shutil.which("unshare"):
        return False
    r = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                        "mount -t tmpfs -o size=64k tmpfs /mnt 2>/dev/null || mount -t tmpfs -o size=64k tmpfs /tmp"],
                       capture_output=True)
    return r.returncode == 0


@pytest.fixture(scope="module")
def batch(dataset, tmp_path_factory):
    """The faults that need no timing from the test, run side by side (each its own `profile` process):
      - the three injected training faults: 6 steps, the trace window on steps 1-5, each fault at step 3 inside it;
      - NVML raising on every query (a fake pynvml first on PYTHONPATH);
      - the disk filling mid-run (fill_disk.py in a private mount namespace), where the machine allows one."""
    work = tmp_path_factory.mktemp("faults")
    base = [f"data={dataset}", "imgsz=64", "batch=4", "plots=False", f"project={work / 'ul'}", "--loader-seconds",
            "0"]
    procs = {}
    for fault in FAULTS:
        out = work / fault.replace("@", "-")
        procs[fault] = (out, yd_popen("profile", *base, "epochs=1", f"name={out.name}", "--steps", "6", "--out", out,
                                      "--json", cwd=work, extra_env={"YD_TEST_FAULT": fault, "PYTHONPATH": SEAM_PATH}))
    procs["nvml"] = (work / "nvml", yd_popen("profile", *base, "epochs=1", "name=nvml", "--steps", "4", "--out",
                                             work / "nvml", "--json", cwd=work,
                                             extra_env={"PYTHONPATH": NVML_PATH, "YD_FAKE_NVML": "raising"}))
    if _can_unshare():
        keep = work / "keep"
        keep.mkdir()
        procs["enospc"] = (keep, subprocess.Popen(
            ["unshare", "--user", "--map-root-user", "--mount", sys.executable, str(HERE / "fill_disk.py"), str(keep),
             "--", sys.executable, "-m", "yolodoctor", "profile", *base, "epochs=2", "name=full", "--steps", "12",
             "--out", "@RUN"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=work, env=env()))
    done = {}
    for key, (out, p) in procs.items():
        stdout, stderr = p.communicate(timeout=300)
        done[key] = (out, p.returncode, stdout, stderr)
    done["work"] = work
    return done


@pytest.mark.parametrize("fault", list(FAULTS))
def test_injected_fault_in_training(fault, batch, dataset, profiled):
    out, rc, stdout, stderr = batch[fault]
    reason, finding, child_code = FAULTS[fault]
    assert rc == 1, stderr[-2000:]
    assert "Traceback" not in stderr
    prof = record.load(out)  # readable, and marked
    assert prof.status == "incomplete" and prof.reason.startswith(reason), prof.reason
    assert prof.exit_code == child_code  # the training process ended by itself (no SIGSEGV from a live profiler)
    doc = json.loads(stdout)
    hit = next(f for f in doc["findings"] if f["id"] == finding)  # the one clear message
    assert hit["severity"] == "error" and reason in hit["message"]
    steps = [e for e in read_events(out / "events.jsonl") if e["type"] == "step"]
    if fault.startswith("nan"):
        assert len(steps) == 6 and [s["loss"] for s in steps[3:]] == [None] * 3
        assert prof.trace.get("file")  # the window closed normally
    else:
        assert [s["step"] for s in steps] == [0, 1, 2]
        assert "inside the trace window" in prof.trace["skipped"]  # stopped, not left running
    assert snapshot(dataset.parent) == profiled.dataset_before


def test_dataloader_worker_killed(dataset, tmp_path, profiled):
    """A train-loader worker dies (SIGKILL) mid-run: the training fails, the profile says why."""
    out = tmp_path / "run"
    p = yd_popen("profile", "--all", "--loader-seconds", "0", "--out", out, "--", sys.executable,
                 HERE / "train_with_workers.py", dataset, tmp_path / "ul", cwd=tmp_path)
    try:
        assert wait_for(lambda: (out / "roles.json").exists() and has_step(out / "events.jsonl"), 120), \
            p.stderr.read() if p.poll() is not None else "no worker seen"
        roles = json.loads((out / "roles.json").read_text())
        worker = next(int(pid) for pid, role in roles.items() if role == "train_worker")
        os.kill(worker, signal.SIGKILL)
        stdout, stderr = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 1, stderr[-2000:]
    prof = record.load(out)
    assert prof.status == "incomplete" and "DataLoader worker" in prof.reason and str(worker) in prof.reason
    assert prof.summary["steps"] >= 1 and "ST204" in stdout
    assert any(e["type"] == "sample" for e in read_events(out / "samples.jsonl"))
    assert snapshot(dataset.parent) == profiled.dataset_before


@pytest.mark.parametrize("sig,code,reason", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_signal_to_fix_apply_stops_without_a_rollback_run(sig, code, reason, profiled, dataset, tmp_path):
    """Ctrl-C (or SIGTERM) during `fix --apply`: the relaunched training stops, its record is saved and marked, no
    rollback training starts after it, the exit code says so and the run being fixed is untouched."""
    run = tmp_path / "prof"
    shutil.copytree(profiled.run, run)
    doc = json.loads((run / "profile.json").read_text())
    doc["args"].update(epochs=40, project=str(tmp_path / "ul"))  # long enough to be stopped mid-run
    (run / "profile.json").write_text(json.dumps(doc))
    before = snapshot(run)
    p = yd_popen("fix", run, "--apply", "--try", "amp=False", cwd=tmp_path)  # a plan of one change: a rollback
    fixed = tmp_path / "fix-prof"                                           # would follow a failure
    try:
        assert wait_for(lambda: has_step(fixed / "events.jsonl"), 120), "the relaunched training never stepped"
        p.send_signal(sig)
        _, stderr = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == code, stderr[-2000:]
    last = [line for line in stderr.splitlines() if line.strip()][-1]
    assert one_line_error(last) and last.startswith(f"yolodoctor: error: {reason}") and "fix --apply stopped" in last
    assert sorted(x.name for x in tmp_path.iterdir() if x.name.startswith("fix-")) == ["fix-prof"]  # no rollback run
    prof = record.load(fixed)
    assert prof.status == "incomplete" and prof.reason == reason and prof.args["amp"] is False
    assert snapshot(run) == before and snapshot(dataset.parent) == profiled.dataset_before


@pytest.mark.parametrize("reason,code", [("interrupted", 130), ("terminated", 143)])
def test_signal_stops_fix_verify_after_the_current_trial(reason, code, tmp_path, monkeypatch):
    """The same for --verify: the trial that was running is recorded, and no further trial starts."""
    from yolodoctor.errors import Interrupted
    from yolodoctor.fixing import trials
    from yolodoctor.fixing.planner import Change, Plan
    from yolodoctor.profiling import runner

    started = []

    def one_trial(args, **kw):
        started.append(kw["out"])
        return kw["out"], record.Profile(status="incomplete", reason=reason)

    monkeypatch.setattr(runner, "run_profile", one_trial)
    plan = Plan(changes=[Change("args", "amp", True, False, "PR201 x"), Change("args", "workers", 0, 1, "DL201 x")])
    with pytest.raises(Interrupted) as e:
        trials.run_trials({"model": "yolo11n.yaml"}, plan, out_dir=tmp_path / "trials", reps=2)
    assert e.value.exit_code == code and len(started) == 1 and "fix --verify stopped" in str(e.value)


def test_nvml_raising_during_a_profile(batch, dataset, profiled):
    """NVML starts and lists a GPU, then every query about it raises: the profile completes, the GPU readings are
    null, and nothing is reported as a failure of the command."""
    out, rc, stdout, stderr = batch["nvml"]
    assert rc in (0, 1) and "Traceback" not in stderr and "internal error" not in stderr, stderr[-2000:]
    prof = record.load(out)
    assert prof.status == "complete" and prof.summary["steps"] == 4
    doc = json.loads(stdout)
    assert not [f for f in doc["findings"] if f["severity"] == "error" and f["category"] != "environment"]
    assert doc["facts"]["gpu.name"] == "NVIDIA H200"  # seen, and nothing unread is passed off as a reading:
    assert not {"gpu.util_mean", "gpu.throttled_share", "gpu.mem_fraction_peak"} & set(doc["facts"])
    records = list(read_events(out / "samples.jsonl"))
    start = next(r for r in records if r["type"] == "sampler_start")
    assert "H200" in json.dumps(start)  # the fake GPU was seen ...
    samples = [r for r in records if r["type"] == "sample"]
    assert samples and all(not any(v not in (None, [], {}) for k, v in (s["gpu"] or {}).items()
                                   if k in ("util", "mem_used", "power_w", "temp_c")) for s in samples)  # ... unread
    assert snapshot(dataset.parent) == profiled.dataset_before


@pytest.mark.parametrize("mode", ["raising", "broken"])
def test_nvml_faults_in_check(mode, tmp_path):
    p = yd("check", "--json", cwd=tmp_path, extra_env={"PYTHONPATH": NVML_PATH, "YD_FAKE_NVML": mode})
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    facts = json.loads(p.stdout)["facts"]
    if mode == "broken":  # the library failed to start: a fact with its reason
        assert facts["env.nvml"] is False and "cannot open shared object" in facts["env.nvml_reason"]
    else:  # it started, then every query failed: the GPU is listed with nothing read
        assert facts["env.nvml"] is True and [g["name"] for g in facts["env.nvml_gpus"]] == ["NVIDIA H200"]


# ---------------------------------------------------------------------------------------------------------------------
# A disk that fills while the run directory is written


def test_disk_fills_during_the_profile(batch, dataset, profiled):
    """A real ENOSPC: the run directory lies on an 8 MB tmpfs (a private mount namespace) that fill_disk.py fills to
    the last byte once the training has stepped. The training is not harmed, the command ends with exit 1 and says
    so, and the record - written into the room set aside at the start - is readable and marked."""
    if "enospc" not in batch:
        pytest.skip("this machine cannot create a private mount namespace (unshare --user --mount) for a small "
                    "file system; test_writers_survive_enospc still checks every writer against ENOSPC")
    keep, rc, _, stderr = batch["enospc"]
    result = json.loads((keep / "result.json").read_text())
    assert result["filled"] and result["free_after_fill"] == 0, (result, stderr[-2000:])
    assert rc == 1, stderr[-2000:]
    assert "Traceback" not in stderr and "filled up during the run" in " ".join(stderr.split()), stderr
    prof = record.load(keep / "run")
    assert prof.status == "incomplete" and prof.reason.startswith("disk full"), prof.reason
    assert prof.finished and prof.summary["steps"] >= 1
    assert (batch["work"] / "ul" / "full" / "results.csv").exists()  # the training itself reached its epoch's end
    assert not (keep / "run" / ".yolodoctor-reserve").exists()
    assert snapshot(dataset.parent) == profiled.dataset_before


def test_writers_survive_enospc(tmp_path, monkeypatch):
    """The writers, against a real ENOSPC (/dev/full) or a simulated one, without mounts: the event stream drops
    records and never raises; the atomic writer keeps the previous record whole; a session that cannot write its
    roles file goes on; the final record's failure is one clear sentence."""
    from yolodoctor.errors import OutputError
    from yolodoctor.profiling import runner, session
    from yolodoctor.record.events import EventWriter
    from yolodoctor.record.rundir import write_json_atomic

    w = EventWriter("/dev/full")  # every write fails with ENOSPC
    for i in range(3):
        w.write("step", step=i)
    w.close()
    assert w.dropped == 3

    write_json_atomic(tmp_path / "profile.json", {"status": "running"})

    def full(*a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError):
        write_json_atomic(tmp_path / "profile.json", {"status": "complete"})
    assert json.loads((tmp_path / "profile.json").read_text()) == {"status": "running"}
    assert [p.name for p in tmp_path.iterdir()] == ["profile.json"]  # no temporary left behind

    run = tmp_path / "run"
    run.mkdir()
    (run / "spec.json").write_text(json.dumps({"args": {}, "steps": 3, "trace": False}))
    s = session.Session(run)
    monkeypatch.setattr(session, "write_json_atomic", full)
    s._write_roles({123: "train_worker"})  # must not raise into the training
    s.end("complete", None)
    assert any(e["type"] == "roles_error" for e in read_events(run / "events.jsonl"))

    prof = record.Profile()
    with pytest.raises(OutputError, match="No space left on device"):
        runner.finalise(run, prof, 0)
