"""The headline of every profile and diagnosis: the bound of the step, its share and evidence, and what to run next -
on the recorded GPU profiles, and on made-up facts for the cases they lack (a healthy run, a failed one)."""

from pathlib import Path

import pytest

from yolodoctor.diagnosis.diagnose import diagnose
from yolodoctor.findings import Finding, Fix, Severity
from yolodoctor.presentation.verdict import verdict

ROOT = Path(__file__).resolve().parents[2]
PROFILES = ROOT / "fixtures" / "profiles"


def of(name):
    d = diagnose(PROFILES / name)
    return verdict(d.facts, d.reported, d.run_dir, d.profile)


@pytest.mark.parametrize("name,bound,share,next_has", [
    ("h200-workers0", "input", 0.7658, "--verify"),  # 77% data wait: DL201's workers
    ("h200-png-1080p", "input", 0.608, "--verify"),  # PNG decode: DL204's cache='ram'
    ("h200-defaults", "host", 1 - 0.174, "--verify"),  # NVML: the GPU busy 17%, data ready: LA201's batch
    ("h100-yolo11x-1280-fp32-oom", "gpu", 0.948, "--verify"),  # NVML: busy 95%, and PR201's AMP still saves time
    ("h100-yolo11l-1280-autobatch95", "memory", 0.594, "--verify"),  # an OOM retry halved the batch (MM205)
])
def test_the_recorded_profiles_get_the_bound_their_findings_describe(name, bound, share, next_has):
    v = of(name)
    assert v.bound == bound and v.share == pytest.approx(share, abs=0.002), v
    assert v.next.startswith(f"yolodoctor fix {PROFILES / name}") and next_has in v.next
    assert not v.healthy and v.caveat is None and v.evidence and v.headline.endswith(".")


def test_the_input_bound_verdict_names_its_evidence_in_human_units():
    v = of("h200-workers0")
    assert v.headline == "The training waits for the next batch 77% of each step."
    assert "the loader alone delivers 77.9 images/s, the training takes 61.2" in v.evidence
    assert "DL201's workers=5 (saves up to 100.1 s per epoch)" in v.next_why


def test_a_profile_without_a_steady_window_says_its_figure_is_not_one_and_asks_for_a_longer_profile():
    v = of("h200-yolo11x-autobatch90")
    assert v.caveat.startswith("not a steady figure: only 0 steps after the first 52")
    assert v.next.startswith("yolodoctor profile ") and "batch=0.9" in v.next and "--verify" not in v.next
    assert not any("(steady)" in e for e in v.evidence)


CPU = {"run.device": "cpu", "run.complete": True, "run.window_valid": True, "run.images_per_s": 80.0,
       "run.data_wait_share": 0.04, "run.step_s": 0.05}


def info(id_, fix=None):
    return Finding(id_, "x", "dataloader", Severity.info, "an info finding.", fix=fix)


def test_a_healthy_run_has_nothing_worth_fixing():
    v = verdict(CPU, [info("DL102"), info("PR205")], "runs/x")
    assert v.bound == "cpu" and v.healthy and v.share == pytest.approx(0.96) and v.next is None
    assert v.next_why.startswith("nothing worth fixing")


def test_a_warning_with_a_fix_makes_the_run_not_healthy_and_the_next_step_fix_verify():
    warn = Finding("DL204", "expensive-decode", "io", Severity.warning, "decode.", fix=Fix(
        args={"cache": "ram"}, seconds_saved_per_epoch=2.0))
    v = verdict({**CPU, "run.data_wait_share": 0.6}, [warn, info("DL102")], "runs/x")
    assert v.bound == "input" and not v.healthy and v.next == "yolodoctor fix runs/x --verify"
    assert v.next_why.startswith("trials DL204's cache='ram' (saves up to 2.0 s per epoch)")
    unsafe = Finding("PR201", "amp-off", "precision", Severity.warning, "amp.", fix=Fix(
        args={"amp": True}, safety="unsafe", changes_training=True))
    assert verdict(CPU, [unsafe], "runs/x").next == "yolodoctor fix runs/x --verify --allow-unsafe"


def test_a_failed_training_is_the_verdict_and_check_is_the_next_step():
    class Prof:
        mode, args, command, status = "args", {"data": "d.yaml", "model": "m.yaml", "project": "p"}, None, "incomplete"
        reason, summary = "crashed: RuntimeError: boom", {}

    crash = Finding("ST204", "training-crashed", "stability", Severity.error, "Training failed: crashed: boom")
    v = verdict({"run.complete": False, "end.steps": 3.0}, [crash], "runs/x", Prof())
    assert v.bound == "failed" and v.headline == "Training failed: crashed: boom."
    assert v.next == "yolodoctor check data=d.yaml model=m.yaml"  # not the output folders
    oom = Finding("MM201", "out-of-memory", "memory", Severity.error, "out of memory.", fix=Fix(args={"batch": 8}))
    v = verdict({"run.complete": False}, [oom], "runs/x", Prof())
    assert v.bound == "memory" and v.next == "yolodoctor fix runs/x" and "batch=8" in v.next_why


def test_the_longer_profile_asked_for_reaches_a_window():
    from types import SimpleNamespace

    prof = SimpleNamespace(mode="script", args={}, command=["python", "train.py"], status="complete", reason=None,
                           summary={"steps": 8, "window": {"first_step": 20, "needs": 10, "valid": False}},
                           steps_limit=None)
    facts = {**CPU, "run.window_valid": False, "run.window_why": "only 0 steady steps after the first 20"}
    # the settling steps first, then the window's ten
    assert verdict(facts, [], "runs/x", prof).next == "yolodoctor profile --steps 30 -- python train.py"
    prof.steps_limit = 8  # --steps 8 was asked: without it the profile runs as long as its window needs
    v = verdict(facts, [], "runs/x", prof)
    assert v.next == "yolodoctor profile -- python train.py" and "without --steps" in v.next_why
