"""Script mode (`profile -- COMMAND`) and `yolodoctor.attach(model)` on unmodified programs, on the CPU."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from yolodoctor.record import profile as record
from yolodoctor.record.events import read_events

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "fixtures" / "scripts"
# one pytest-xdist worker for the module: its module fixtures (the datasets, the profile `twice`) are made once, and
# its two-rank trainings (four processes each, with their loader workers) never run two at once
pytestmark = pytest.mark.xdist_group("script-mode")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    from yolodoctor.datasets.synth import make_dataset

    return Path(make_dataset(tmp_path_factory.mktemp("ds") / "ds", images=16, val_images=4, width=160, height=120,
                             workers=1).yaml_path)


def profile(tmp_path, *command, steps="3"):
    out = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "yolodoctor", "profile", "--steps", steps, "--loader-seconds", "1",
                        "--out", str(out), "--", *map(str, command)], capture_output=True, text=True, timeout=300,
                       cwd=tmp_path, env={**os.environ, "YOLO_OFFLINE": "1"})
    return p, out


def test_plain_script(dataset, tmp_path):
    p, out = profile(tmp_path, sys.executable, SCRIPTS / "train_plain.py", dataset, tmp_path / "ul")
    assert p.returncode == 0, p.stderr[-2000:]
    prof = record.load(out)
    assert prof.mode == "script" and prof.status == "complete" and prof.summary["steps"] == 3
    assert prof.settings["batch"] == 4 and prof.loader_capacity["images_per_s"] > 0
    assert any(e["type"] == "sample" for e in read_events(out / "samples.jsonl"))


@pytest.fixture(scope="module")
def twice(dataset, tmp_path_factory):
    """`profile --steps 3` of train_twice_custom.py (two train() calls, the second with a trainer subclass), with its
    file's bytes from before the run: (the process, the run directory, the bytes). Two tests read it: the record
    itself, and `fix --apply` replaying it (which writes its own run directory beside it, never into it)."""
    work = tmp_path_factory.mktemp("twice")
    script = SCRIPTS / "train_twice_custom.py"
    before = script.read_bytes()
    p, out = profile(work, sys.executable, script, dataset, work / "ul")
    return p, out, before


def test_two_train_calls_and_custom_trainer(twice):
    p, out, _ = twice
    assert p.returncode == 0, p.stderr[-2000:]
    assert "SCRIPT FINISHED" in p.stderr  # the program went on after its bounded first call
    prof = record.load(out)
    assert [t["steps"] for t in prof.summary["per_train"]] == [3, 3]
    begins = [e for e in read_events(out / "events.jsonl") if e["type"] == "train_begin"]
    assert [b["trainer"] for b in begins] == ["DetectionTrainer", "MyTrainer"]


def test_script_that_crashes_and_one_that_never_trains(tmp_path):
    crash = "from ultralytics.utils.callbacks import base; import yolodoctor.profiling.hooks as h; " \
            "h.session(); raise RuntimeError('boom')"
    p, out = profile(tmp_path, sys.executable, "-c", crash)
    assert p.returncode == 1
    prof = record.load(out)
    assert prof.status == "incomplete" and "boom" in prof.reason
    (tmp_path / "b").mkdir()
    p, out2 = profile(tmp_path / "b", sys.executable, "-c", "print('hello')")
    assert p.returncode == 1 and record.load(out2).reason.startswith("no Ultralytics training")


def test_missing_program_is_exit_2(tmp_path):
    p, _ = profile(tmp_path, "/no/such/program")
    assert p.returncode == 2 and "cannot run" in p.stderr and "Traceback" not in p.stderr


def test_attach_from_a_notebook(dataset, tmp_path):
    out = tmp_path / "nb"
    p = subprocess.run([sys.executable, SCRIPTS / "attach_notebook.py", dataset, tmp_path / "ul", out],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env={**os.environ, "YOLO_OFFLINE": "1", "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr[-2000:]
    prof = record.load(out)
    assert prof.mode == "attach" and prof.status == "complete" and prof.summary["steps"] == 5
    assert all(prof.host_probe[k]["python_ms"] > 0 for k in ("before", "after"))  # the host's speed around it
    assert any(e["type"] == "sample" for e in read_events(out / "samples.jsonl"))


def test_fix_apply_reaches_an_unedited_script_and_its_custom_trainer(twice):
    import json

    script = SCRIPTS / "train_twice_custom.py"
    p, out, before = twice
    assert p.returncode == 0, p.stderr[-2000:]
    f = subprocess.run([sys.executable, "-m", "yolodoctor", "fix", str(out), "--apply", "--try", "batch=2", "--json"],
                       capture_output=True, text=True, timeout=600, cwd=out.parent,  # where the profile ran
                       env={**os.environ, "YOLO_OFFLINE": "1"})
    assert f.returncode == 0, f.stderr[-2000:]
    applied = json.loads(f.stdout)["applied"]
    assert applied["status"] == "complete" and not applied["rolled_back"]
    run = Path(applied["run_dir"])
    events = list(read_events(run / "events.jsonl"))
    # both train() calls of the program, the plain trainer and the subclass, ran with the override...
    assert [e["trainer"] for e in events if e["type"] == "overrides"] == ["DetectionTrainer", "MyTrainer"]
    assert [e["settings"]["batch"] for e in events if e["type"] == "settings"] == [2, 2]
    # ...whole (no --steps: the applied run is the real training), and the program's file was not touched
    prof = record.load(run)
    assert prof.mode == "script" and prof.status == "complete" and prof.steps_limit is None
    assert script.read_bytes() == before


def test_the_trainer_is_left_alone_when_the_run_asks_for_no_override(tmp_path, monkeypatch):
    import types

    from yolodoctor.profiling import hooks
    from yolodoctor.profiling.session import ENV_RUN_DIR

    (tmp_path / "spec.json").write_text('{"overrides": {}, "torch_flags": {}}')
    monkeypatch.setenv(ENV_RUN_DIR, str(tmp_path))

    class Base:
        def __init__(self, cfg=None, overrides=None, _callbacks=None):
            self.overrides = overrides

    module = types.SimpleNamespace(BaseTrainer=Base, DEFAULT_CFG={})
    original = Base.__init__
    hooks.patch_trainer(module)
    assert Base.__init__ is original  # a profile (not a fix) runs the user's trainer exactly as written


def test_ultralytics_silent_fallbacks_are_named_from_the_run(dataset, tmp_path):
    # each observed from the run itself: the RAM guard's refusal and AutoBatch's fallback from what Ultralytics logs
    # (recorded whatever YOLO_VERBOSE says), workers and AMP from what ran against what was asked, anomaly detection
    # from torch's own state
    p, out = profile(tmp_path, sys.executable, SCRIPTS / "train_silent_fallbacks.py", dataset, tmp_path / "ul",
                     steps="4")
    assert p.returncode == 0, p.stderr[-2000:]
    d = subprocess.run([sys.executable, "-m", "yolodoctor", "diagnose", str(out), "--json"], capture_output=True,
                       text=True, timeout=120, env={**os.environ, "YOLO_OFFLINE": "1"})
    import json

    doc = json.loads(d.stdout)
    found = {f["id"]: f for f in doc["findings"]}
    assert {"MM101", "MM207", "DL102", "PR205", "CF205"} <= set(found), sorted(found)
    assert "fell back to the default batch 16: intended for GPU devices" in found["MM207"]["message"]
    assert "workers=4 was asked for, the train loader ran 0: on the CPU" in found["DL102"]["message"]
    assert "AMP does nothing on the CPU" in found["PR205"]["message"]
    f = doc["facts"]
    assert f["ul.cache_refused"] and f["ul.cache_available_gb"] == 0.0 and f["settings.cache_requested"] == "ram"
    assert f["settings.mosaic_buffer"] is True  # no cache after all: mosaic keeps its buffer
    assert "read:" in f["ul.files_read"] and f["ul.files_slow"] is False


def test_a_two_rank_ddp_training_is_followed_rank_by_rank_in_one_run_directory(dataset, tmp_path):
    # torchrun starts two ranks (gloo, the CPU); each rank's session writes its own stream, the one sampler sees both
    # ranks' processes under the launcher and tells them apart by the RANK their environment holds
    p, out = profile(tmp_path, sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                     SCRIPTS / "train_ddp_cpu.py", dataset, tmp_path / "ul", steps="12")
    assert p.returncode == 0, p.stderr[-3000:]
    assert (out / "events.jsonl").exists() and (out / "events-rank1.jsonl").exists()
    starts = {}
    for name in ("events.jsonl", "events-rank1.jsonl"):
        events = list(read_events(out / name))
        start = next(e for e in events if e["type"] == "run_start")
        starts[start["rank"]] = start["pid"]
        assert len([e for e in events if e["type"] == "step"]) == 12  # the same bound on every rank
        assert any(e["type"] == "bounded" for e in events)
    assert sorted(starts) == [0, 1] and starts[0] != starts[1]
    prof = record.load(out)
    assert prof.status == "complete" and [r["rank"] for r in prof.ranks] == [0, 1]
    assert [r["pid"] for r in prof.ranks] == [starts[0], starts[1]]
    assert all(r["steps"] == 12 and r["images"] == 12 * 4 for r in prof.ranks)  # batch 8 split over 2 ranks
    assert prof.summary["world_size"] == 2 and prof.summary["images"] == 2 * 12 * 4
    samples = [s for s in read_events(out / "samples.jsonl") if s.get("type") == "sample" and s.get("ranks")]
    assert samples, "no sample saw the ranks"
    seen = {k: v["pid"] for s in samples for k, v in s["ranks"].items()}
    assert seen == {"0": starts[0], "1": starts[1]}
    assert max(s["ranks"]["1"]["workers"] for s in samples if "1" in s["ranks"]) == 1  # rank 1's own worker
    assert (out / "roles-rank1.json").exists()


def ddp(tmp_path, *flags, args=()):
    """`yolodoctor profile FLAGS -- torchrun --nproc_per_node 2 train_ddp_cpu.py DATA PROJECT ARGS` on the CPU."""
    out = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "yolodoctor", "profile", "--loader-seconds", "0", "--out", str(out),
                        *flags, "--", sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                        str(SCRIPTS / "train_ddp_cpu.py"), str(tmp_path / "data.yaml"), str(tmp_path / "ul"),
                        *args], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env={**os.environ, "YOLO_OFFLINE": "1"})
    return p, out


@pytest.fixture
def ddp_data(dataset, tmp_path):
    (tmp_path / "data.yaml").write_text(Path(dataset).read_text().replace("path:", f"path: {Path(dataset).parent}  #"))
    return tmp_path


def test_ddp_ranks_with_different_workers_agree_on_one_bound(ddp_data):
    # rank 1 runs no loader worker: its own default bound is shorter than rank 0's; stopping there would leave rank 0
    # alone in the all-reduce for good
    p, out = ddp(ddp_data, args=("1", "0"))
    assert p.returncode == 0, p.stderr[-3000:]
    limits = [next(e["steps"] for e in read_events(out / n) if e["type"] == "steps_limit")
              for n in ("events.jsonl", "events-rank1.jsonl")]
    steps = [sum(e["type"] == "step" for e in read_events(out / n)) for n in ("events.jsonl", "events-rank1.jsonl")]
    assert limits[0] == limits[1] == steps[0] == steps[1]


def test_a_whole_ddp_run_counts_each_rank_its_own_share_of_images(ddp_data):
    p, out = ddp(ddp_data, "--all", args=("1",))
    assert p.returncode == 0, p.stderr[-3000:]
    prof = record.load(out)
    images = [e["images"] for n in ("events.jsonl", "events-rank1.jsonl") for e in read_events(out / n)
              if e["type"] == "step"]
    assert images == [4, 4, 4, 4]  # 16 images over 2 ranks, batch 8 split in 4s: 2 steps each
    assert prof.summary["images"] == 16 and prof.summary["world_size"] == 2


def test_a_ddp_program_that_trains_twice_is_followed_on_every_rank(ddp_data):
    p, out = ddp(ddp_data, "--steps", "6", args=("1", "1", "twice"))
    assert p.returncode == 0, p.stderr[-3000:]
    for name in ("events.jsonl", "events-rank1.jsonl"):
        events = list(read_events(out / name))
        assert [e["train_index"] for e in events if e["type"] == "bounded"] == [0, 1]
        assert sum(e["type"] == "step" for e in events) == 12


def test_a_rank_that_runs_out_of_memory_is_the_reason_not_the_others_broken_connection(ddp_data):
    p, out = ddp(ddp_data, "--steps", "12", args=("1", "1", "oom@3"))
    prof = record.load(out)
    assert prof.status == "incomplete" and prof.reason.startswith("out-of-memory"), prof.reason
    assert p.returncode == 1  # a failed training, not a Ctrl-C: fix rejects the trial and goes on


@pytest.fixture(scope="module")
def cls_dataset(tmp_path_factory):
    from yolodoctor.datasets.synth import make_classify_dataset

    d = tmp_path_factory.mktemp("cls") / "ds"
    make_classify_dataset(d, images=24, val_images=3, width=64, height=48)
    return d


def test_a_classification_script_and_a_notebook_are_recorded_with_classifications_own_dataset(cls_dataset, tmp_path):
    # script mode: the dataset the script opened is checked after the run (a folder, not a data.yaml); attach:
    # the same recorder. Both read ClassificationDataset's cache flags and find no mosaic.
    import json

    script = SCRIPTS / "train_classify.py"
    p, out = profile(tmp_path, sys.executable, script, cls_dataset, tmp_path / "ul")
    assert p.returncode == 0, p.stderr[-2000:]
    prof = record.load(out)
    st = prof.settings
    assert st["task"] == "classify" and st["cache"] == "ram" and st["mosaic"] is False, st
    assert prof.check_facts["dataset.task"] == "classify" and prof.check_facts["dataset.images"] == 27
    d = subprocess.run([sys.executable, "-m", "yolodoctor", "diagnose", str(out), "--json"], capture_output=True,
                       text=True, timeout=120, env={**os.environ, "YOLO_OFFLINE": "1"})
    ids = [f["id"] for f in json.loads(d.stdout)["findings"]]
    assert d.returncode == 0 and "DL207" not in ids and "MM101" not in ids, ids
    nb = tmp_path / "nb"
    a = subprocess.run([sys.executable, script, cls_dataset, tmp_path / "ul2", nb], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path, env={**os.environ, "YOLO_OFFLINE": "1", "PYTHONPATH": str(ROOT)})
    assert a.returncode == 0, a.stderr[-2000:]
    att = record.load(nb)
    assert att.mode == "attach" and att.status == "complete" and att.settings["cache"] == "ram"
    assert att.settings["task"] == "classify" and att.settings["mosaic"] is False
