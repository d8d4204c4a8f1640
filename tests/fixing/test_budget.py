"""What fix --verify will cost against what the plan can save, and a trial design fitted to a budget."""

import json
import shutil
from pathlib import Path

from yolodoctor.fixing.budget import estimate, fit, trial_seconds
from yolodoctor.fixing.candidates import candidates
from yolodoctor.fixing.planner import Change, Plan
from yolodoctor.fixing.records import TrialReport

ROOT = Path(__file__).resolve().parents[2]
SUMMARY = {"phases": {"start": 1.0, "model": 9.0, "setup": 12.0, "first_batch": 2.0, "steps": 20.0, "end": 6.0,
                      "total": 50.0}, "step_s_median": 0.1}
SETTINGS = {"batch": 16, "workers": 2, "prefetch_factor": 4, "epochs": 20}


def plan():
    return Plan(changes=[Change("args", "workers", 2, 15, "DL201 t", seconds_saved_per_epoch=100.0),
                         Change("args", "cache", None, "ram", "DL204 t", seconds_saved_per_epoch=30.0),
                         Change("args", "batch", 16, 64, "LA201 t", seconds_saved_per_epoch=60.0)], epochs=20)


def test_a_trial_costs_the_profiles_fixed_part_plus_its_default_steps():
    base, workers, *_ = candidates(plan())
    assert trial_seconds(base, SUMMARY, SETTINGS) == 30.0 + (20 + 8 + 20 + 5) * 0.1  # fixed 50 - 20 s of steps
    assert trial_seconds(workers, SUMMARY, SETTINGS) == 30.0 + (20 + 60 + 20 + 5) * 0.1
    e = estimate(candidates(plan()), 2, 2, SUMMARY, SETTINGS, 1000.0)
    assert e.trials == 10 and round(e.verify_s, 1) == round(2 * sum(e.per_trial_s.values()), 1)


def test_a_budget_drops_extra_repeats_then_the_smallest_expected_gains():
    cands = candidates(plan())
    assert [c.name for c in cands] == ["baseline", "workers=15", "cache=ram", "batch=64", "plan"]
    kept, top, e = fit(cands, 2, 4, SUMMARY, SETTINGS, 1000.0, None)
    assert kept == cands and top == 4 and e.skipped == []
    kept, top, e = fit(cands, 2, 4, SUMMARY, SETTINGS, 1000.0, 250.0)
    assert top == 2 and len(kept) == 2 and e.skipped[0].startswith("extra repeats")  # the smallest design: 294 s
    assert "baseline" in [c.name for c in kept] and "cache=ram" not in [c.name for c in kept]  # 30 s/epoch: first out
    assert any(s.startswith("cache=ram") for s in e.skipped)


def test_fix_says_what_verify_costs_against_what_it_saves_and_fits_a_long_training(tmp_path, monkeypatch):
    from click.testing import CliRunner

    import yolodoctor.fixing.trials as trials
    from yolodoctor.cli import cli

    run = tmp_path / "h200-defaults"
    shutil.copytree(ROOT / "fixtures/profiles/h200-defaults", run)
    seen = {}

    def fake(base_args, p, **kw):
        seen.update(kw)
        return TrialReport([], [], None, [])
    monkeypatch.setattr(trials, "run_trials", fake)
    r = CliRunner().invoke(cli, ["fix", str(run), "--verify", "--yes", "--json", "--budget", "100000"])
    assert r.exit_code == 0, r.output
    err = " ".join(r.stderr.split())
    assert "verify: about" in err and "the plan can save at most" in err and "over the planned 20 epochs" in err
    assert "skipped" not in err
    full = len(seen["cands"])
    # 20 epochs: by default verify may cost a quarter of what the plan can save; here that is less than all trials
    r = CliRunner().invoke(cli, ["fix", str(run), "--verify", "--yes", "--json"])
    err = " ".join(r.stderr.split())
    saving = json.loads(r.stdout)["plan"]["saving"]["planned_run_upper_bound"]
    assert r.exit_code == 0 and f"budget {0.25 * saving:.0f} s (a quarter of the saving" in err
    assert f"at most {saving:.0f} s (what the training can pay back)" in err
    assert "left out:" in err and "the plan is trialled whole against the baseline" in err
    assert "--verify --budget" in err and "runs them all" in err
    # within it, the plan whole (what --apply relaunches) against the baseline, two repeats each
    assert [c.name for c in seen["cands"]] == ["baseline", "batch=64+workers=13+deterministic=False+compile=reduce-"
                                                           "overhead"] and seen["cands"][1].against == "baseline"
    assert len(seen["cands"]) < full and seen["max_reps"] == 2
    assert json.loads(r.stdout)["command"] == "fix"


def test_the_design_shrinks_with_the_planned_training():
    # a quarter of what the plan can save over the planned epochs: the shorter the training, the fewer trials
    from yolodoctor.fixing.budget import SHARE

    cands = candidates(plan())
    sizes = []
    for epochs in (100, 40, 10):
        saving = 100.0 * epochs  # the largest single gain, 100 s an epoch
        kept, top, e = fit(cands, 2, 4, SUMMARY, SETTINGS, saving, SHARE * saving)
        sizes.append((len(kept), top))
        assert e.verify_s <= SHARE * saving or len(kept) == 2
    assert sizes[0] == (5, 4) and sizes[0] >= sizes[1] >= sizes[2] and 2 <= sizes[2][0] < 5
    assert next(c.name for c in kept) == "baseline" and len(kept) >= 2  # never the baseline alone


def test_unverified_the_plan_is_applied_without_what_reschedules_training_or_compiles(tmp_path, monkeypatch):
    # a budget no trial fits: verify does not run, and --apply takes only what trains the same model on the same
    # schedule at no risk (never batch=64: another warm-up and BatchNorm batch, whose loss only a trial can judge;
    # never compile: on an H100 a 2-epoch training applied with it unverified took 133 s instead of 52, and at batch
    # 4 CUDA graphs crashed)
    from click.testing import CliRunner

    import yolodoctor.fixing.apply as apply
    from yolodoctor.cli import cli

    run = tmp_path / "h200-defaults"
    shutil.copytree(ROOT / "fixtures/profiles/h200-defaults", run)
    got = []
    monkeypatch.setattr(apply, "relaunch", lambda base, changes, *a, **k: got.append(changes) or {
        "status": "complete", "run_dir": None, "rolled_back": False, "changes": [c.to_dict() for c in changes]})
    r = CliRunner().invoke(cli, ["fix", str(run), "--verify", "--apply", "--yes", "--budget", "1", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["verify"]["fits"] is False and doc["trials"] == [] and doc["applied"]["verified"] is False
    keys = [c.key for c in got[0]]
    # the workers raised to feed batch=64 go with it: on two H100 launch-bound trainings, applying more workers at
    # the original batch ran their steps at 0.93x and 0.88x (bench/results/scenarios)
    assert keys == ["deterministic"]
    err = " ".join(r.stderr.split())
    assert "not applied unverified" in err and "batch=64" in err
    assert "compile=reduce-overhead (compilation costs a one-off time" in err
    assert "workers=13 (it serves batch=64, which is not applied)" in err


def test_apply_without_verify_leaves_out_what_only_a_trial_can_judge_but_keeps_the_users_own_try(tmp_path,
                                                                                                monkeypatch):
    from click.testing import CliRunner

    import yolodoctor.fixing.apply as apply
    from yolodoctor.cli import cli

    run = tmp_path / "h200-defaults"
    shutil.copytree(ROOT / "fixtures/profiles/h200-defaults", run)
    got = []
    monkeypatch.setattr(apply, "relaunch", lambda base, changes, *a, **k: got.append(changes) or {
        "status": "complete", "run_dir": None, "rolled_back": False, "changes": [c.to_dict() for c in changes]})
    r = CliRunner().invoke(cli, ["fix", str(run), "--apply", "--yes", "--json"])
    assert r.exit_code == 0, r.output
    keys = [c.key for c in got[0]]
    assert keys == ["deterministic"]
    assert "not applied unverified" in r.stderr and "compile=reduce-overhead" in r.stderr
    monkeypatch.setattr("yolodoctor.fixing.judge.needs_trial", lambda c: "a test's reason" if c.key == "val" else None)
    r = CliRunner().invoke(cli, ["fix", str(run), "--apply", "--yes", "--json", "--try", "val=False"])
    assert r.exit_code == 0, r.output
    assert ("val", False) in [(c.key, c.after) for c in got[1]]  # asked for by name: applied as asked


def test_what_an_unverified_apply_leaves_out_takes_the_changes_made_for_it_along():
    from yolodoctor.fixing.fix import _untried
    from yolodoctor.fixing.planner import Change

    batch = Change("args", "batch", 16, 64, "LA201", changes_training=True)
    feed = Change("args", "workers", 8, 13, "planner loader-capacity", requires=["batch"])
    comp = Change("args", "compile", False, "reduce-overhead", "LA202", requires=["batch", "deterministic"])
    det = Change("args", "deterministic", True, False, "CF201")
    said: list[str] = []
    assert _untried([batch, feed, comp, det], said.append, keep_tries=False) == [det]
    assert "workers=13 (it serves batch=64, which is not applied)" in said[0]
    alone = Change("args", "workers", 2, 15, "DL201")  # raised for the loader's own sake: applied
    assert _untried([batch, alone], said.append, keep_tries=False) == [alone]
    cache = Change("args", "cache", None, "ram", "DL204")
    fed = Change("args", "workers", 8, 15, "planner loader-capacity", requires=["cache"])
    assert _untried([cache, fed], said.append, keep_tries=False) == [cache, fed]


def test_a_trial_in_the_warmups_ramp_is_priced_past_it():
    base, _, _, batch, _ = candidates(plan())
    ramp = {**SETTINGS, "nbs": 64, "accumulate": 4, "warmup_iterations": 189}  # batch 16 of 63 batches, 3 epochs
    # the ramp ends at step 158 (accumulation 4): the trial runs 20 steps past it and the trace window
    assert trial_seconds(base, SUMMARY, ramp) == 30.0 + (158 + 20 + 5) * 0.1
    # batch=64: accumulation 1, no ramp; its default steps at 4x the step time
    assert trial_seconds(batch, SUMMARY, ramp) == 30.0 + (20 + 8 + 20 + 5) * 0.1 * 4
    assert trial_seconds(base, SUMMARY, SETTINGS) == 30.0 + (20 + 8 + 20 + 5) * 0.1  # no warm-up recorded
    far = {**ramp, "warmup_iterations": 1500}  # a ramp to step 1,250: past the bound's reach, not extended for
    assert trial_seconds(base, SUMMARY, far) == 30.0 + (20 + 8 + 20 + 5) * 0.1
