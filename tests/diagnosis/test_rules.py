"""Rule files: the schema, the safe expression language, and the exit-2 contract for bad user rules."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from yolodoctor.diagnosis.engine import LiveEngine, evaluate
from yolodoctor.diagnosis.rules import RuleError, load_rules

ROOT = Path(__file__).resolve().parents[2]
GOOD = """
id: XX101
name: slow-steps
category: launch
severity: warning
facts: [run.step_s, run.batch]
condition: run.step_s > 0.05
message: "steps take {run.step_s:.2f} s at batch {run.batch:.0f}"
fix:
  args: {batch: "int(min(64.0, run.batch * 2.0))"}
  seconds_saved_per_epoch: "run.step_s * 10.0"
docs: {what: slow steps, why: time, fix: bigger batch}
"""


def write(tmp_path, text, name="r.yaml"):
    d = tmp_path / "rules"
    d.mkdir(exist_ok=True)
    (d / name).write_text(text)
    return d


def test_builtin_rules_load_and_are_documented():
    rules = load_rules()
    assert len(rules) >= 20
    for c in rules:
        assert c.rule.docs.what and c.rule.docs.why and c.rule.docs.fix


def test_user_rule_fires_with_computed_fix(tmp_path):
    rules = load_rules([write(tmp_path, GOOD)], builtin=False)
    findings, _ = evaluate(rules, {"run.step_s": 0.08, "run.batch": 16.0})
    assert findings[0].message == "steps take 0.08 s at batch 16"
    assert findings[0].fix.args == {"batch": 32} and findings[0].fix.seconds_saved_per_epoch == 0.8
    assert findings[0].evidence == {"run.step_s": 0.08, "run.batch": 16}


def test_missing_fact_keeps_rule_silent(tmp_path):
    rules = load_rules([write(tmp_path, GOOD)], builtin=False)
    findings, outcomes = evaluate(rules, {"run.step_s": 0.08})
    assert findings == [] and outcomes[0].state == "missing" and outcomes[0].detail == "run.batch"


@pytest.mark.parametrize("change,needle", [
    (("run.step_s > 0.05", "__import__('os').system('touch pwned') == 0"), "calls"),
    (("run.step_s > 0.05", "open('/etc/passwd') == ''"), "calls"),
    (("run.step_s > 0.05", "run.step_s.__class__ == 1"), "fails on its declared facts"),
    (("run.step_s > 0.05", "os.environ.HOME == ''"), "reads os"),
    (("run.step_s > 0.05", "gpu.util_mean > 1.0"), "reads gpu"),
    (("run.step_s > 0.05", "run.step_s * 2.0"), "true or false"),
    (("run.step_s > 0.05", "run.step_s >"), "does not parse"),
    (("{run.step_s:.2f}", "{run.step_s.__class__}"), "message"),
    (("{run.step_s:.2f}", "{0}"), "message"),
    (("category: launch", "category: vibes"), "category"),
    (("id: XX101", "id: bad"), "id"),
    (("facts: [run.step_s, run.batch]", "facts: [run.step_s, run.batch, no.such_fact]"), "unknown fact"),
    (("docs: {what: slow steps, why: time, fix: bigger batch}", "docs: {what: x}"), "docs"),
    (("int(min(64.0, run.batch * 2.0))", "system('rm -rf /')"), "calls"),
])
def test_bad_rules_are_rejected_with_file_and_id(tmp_path, change, needle):
    d = write(tmp_path, GOOD.replace(*change))
    with pytest.raises(RuleError) as e:
        load_rules([d], builtin=False)
    assert needle in str(e.value) and "r.yaml" in str(e.value)
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()


def test_bad_yaml_and_duplicates(tmp_path):
    with pytest.raises(RuleError, match="not valid YAML"):
        load_rules([write(tmp_path, "id: [unclosed")], builtin=False)
    d = write(tmp_path, GOOD, "a.yaml")
    (d / "r.yaml").write_text(GOOD)
    with pytest.raises(RuleError, match="already used"):
        load_rules([d], builtin=False)
    dup = tmp_path / "dup"
    dup.mkdir()
    (dup / "x.yaml").write_text(GOOD.replace("XX101", "LA201"))
    with pytest.raises(RuleError, match="LA201"):
        load_rules([dup])


def test_cli_rejects_a_malicious_rule_with_exit_2(tmp_path):
    d = write(tmp_path, GOOD.replace("run.step_s > 0.05", "__import__('os').system('touch pwned') == 0"))
    for args in (["rules", "--rules", d], ["diagnose", ROOT / "fixtures/profiles/h200-defaults", "--rules", d]):
        p = subprocess.run([sys.executable, "-m", "yolodoctor", *map(str, args)], capture_output=True, text=True,
                           cwd=tmp_path, env={**os.environ, "YOLO_OFFLINE": "1"})
        assert p.returncode == 2 and "XX101" in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "pwned").exists()


def test_live_engine_hysteresis(tmp_path):
    live = LiveEngine(load_rules([write(tmp_path, GOOD)], builtin=False), on=3, off=2)
    slow, fast = {"run.step_s": 0.08, "run.batch": 16.0}, {"run.step_s": 0.01, "run.batch": 16.0}
    seq = [slow, slow, fast, slow, slow, slow, fast, slow, fast, fast]
    events = []
    for facts in seq:
        appeared, cleared = live.update(facts)
        events.append(("+" if appeared else "") + ("-" if cleared else ""))
    # appears only after 3 true in a row; a single false does not clear it; two falses do
    assert events == ["", "", "", "", "", "+", "", "", "", "-"]


def test_live_facts_over_a_rolling_window_of_a_recorded_run(tmp_path):
    import gzip
    import shutil

    from yolodoctor.diagnosis import facts

    src = ROOT / "fixtures" / "profiles" / "h200-workers0"
    for n in ("events.jsonl", "samples.jsonl"):
        with gzip.open(src / f"{n}.gz", "rb") as a, open(tmp_path / n, "wb") as b:
            shutil.copyfileobj(a, b)
    f = facts.live(tmp_path, window_s=5.0)
    assert f["run.window_steps"] < 30 and f["run.data_wait_share"] > 0.5 and f["settings.workers"] == 0
    live = LiveEngine(load_rules(), on=2, off=2)
    assert not live.update(f)[0]  # once is not enough
    appeared, _ = live.update(f)
    assert "DL201" in [x.id for x in appeared]


def _applied_h200_facts(run_id: str) -> dict:
    """The facts the H200 benchmark recorded of fix --apply's relaunched run, as kept in
    fixtures/trials/h200-applied-runs.json: bench/results holds only each part's latest run."""
    import json

    rec = json.loads((ROOT / "fixtures/trials/h200-applied-runs.json").read_text())[run_id]
    run = rec["applied_run"]
    cores = float(rec["cores"])
    f = {**run["facts"], "run.device": "cuda", "run.images_per_s": run["steady_ips"], "cpu.usable": cores,
         "cpu.count": cores, "settings.workers": float(run["settings"]["workers"]),
         "run.batch": float(run["settings"]["batch"]), "settings.nbs": 64.0, "run.step_s": run["step_s_median"],
         "run.epoch_s": run["settings"]["images_per_epoch"] / run["steady_ips"], "run.ranks": 1.0}
    f["loader.headroom"] = f["loader.capacity_images_per_s"] / f["run.images_per_s"]
    return f


def test_an_applied_run_left_host_bound_names_the_host_side_not_the_loader():
    # fix-unsafe on the H200, 2026-12-04: it applied batch 64 + 14 workers (compile undecided in its trials); the
    # relaunched run had no data wait, the GPU 38% busy and a loader 36% faster than the training: what is left is the
    # host's per-step work - batch 128 (unsafe: beyond nbs) and the syncs - and the loader is not named
    findings, outcomes = evaluate(load_rules(), _applied_h200_facts("fix-unsafe-2026-12-04b"))
    assert [f.id for f in findings] == ["LA203", "SY201"]
    assert "Host-bound at batch 64 with the GPU 38% busy" in findings[0].message
    state = {o.rule: o.state for o in outcomes}
    assert (state["DL206"], state["DL202"]) == ("false", "false")


@pytest.mark.parametrize("part,ips,cap", [("fix-safe-2026-12-04a", 964, 1008), ("fix-unsafe-2026-12-03e", 817, 898)])
def test_the_loader_at_capacity_names_the_cpu_after_the_gpu_side_is_fixed(part, ips, cap):
    # the applied runs on the H200 (fix-safe 2026-12-04, fix-unsafe 2026-12-03): no data wait, NVML about half busy,
    # every core busy, a loader that alone made 4-10% more than the training took; the rules of the time named only bf16
    # (PR202) and cuDNN or determinism flags, GPU-side changes that cannot outrun the loader
    facts = _applied_h200_facts(part)
    findings, outcomes = evaluate(load_rules(), facts)
    by = {f.id: f for f in findings}
    dl = by["DL206"]
    assert f"takes {ips} images/s and its loader alone makes {cap} with 14 workers" in dl.message
    assert "The host CPU is the limit, not the GPU" in dl.message and dl.fix.args == {} and dl.fix.safety == "safe"
    # evaluated and false, not silent for a missing fact: 14 workers on 16 cores, no data wait, no loader headroom
    state = {o.rule: o.state for o in outcomes}
    assert (state["DL205"], state["DL202"], state["LA201"]) == ("false", "false", "false")
    # the same run with a loader 30% faster than the training, the GPU near full, idle cores, data wait, or workers
    # on every core (DL205's case): not this
    for change in ({"loader.headroom": 1.3}, {"gpu.util_mean": 85.0}, {"cpu.saturated_share": 0.2},
                   {"run.data_wait_share": 0.3}, {"settings.workers": 15.0}):
        assert "DL206" not in {f.id for f in evaluate(load_rules(), {**facts, **change})[0]}


def test_explain_says_which_condition_failed_with_the_values_it_read():
    from yolodoctor.diagnosis.engine import evaluate
    from yolodoctor.diagnosis.rules import builtin_rules

    facts = {"run.oom_retries": 0.0, "run.batch": 16.0, "run.batch_started": 16.0}
    outcomes = {o.rule: o for o in evaluate(builtin_rules(), facts)[1]}
    assert outcomes["MM205"].state == "false"
    assert outcomes["MM205"].detail.startswith("`run.oom_retries > 0.0` does not hold with run.oom_retries = 0")
    assert outcomes["VL201"].words.startswith("not judged: this run has no run.val_share")
    assert outcomes["MM205"].words.startswith("silent: `run.oom_retries > 0.0` does not hold")


def test_diagnose_explain_leads_with_what_was_judged_in_units_and_groups_what_was_not():
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "yolodoctor", "diagnose", str(ROOT / "fixtures/profiles/h200-defaults"),
                        "--explain"], capture_output=True, text=True, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
                       timeout=120)
    out = p.stdout
    judged, _, rest = out.partition("Not judged (this run lacks")
    assert "Judged, silent" in judged and "DL201: run.device == 'cuda'" in judged
    assert "run.data_wait_share 0.3%" in judged and "0.002959" not in out  # in units, not raw
    assert any(line.startswith("dataset.*: DS001 DS002") for line in rest.splitlines())  # one line for the group
    assert "not judged: this run has no" not in out
    assert len(rest.splitlines()) < 30  # about 70 rules not judged, grouped: a line per kind of fact lacking


def test_a_rule_for_other_tasks_stays_silent_and_says_why():
    from yolodoctor.diagnosis.engine import evaluate
    from yolodoctor.diagnosis.rules import builtin_rules

    facts = {"settings.cache_requested": "ram", "settings.mosaic": True, "settings.mosaic_buffer": False}
    fired = {f.id for f in evaluate(builtin_rules(), facts)[0]}
    assert "DL207" in fired  # a detection training whose cache turned the mosaic buffer off
    found, outcomes = evaluate(builtin_rules(), {**facts, "settings.task": "classify"})
    assert "DL207" not in {f.id for f in found}
    o = next(o for o in outcomes if o.rule == "DL207")
    assert o.state == "not-applicable" and o.words == ("does not apply: a classify training; it applies to detect, "
                                                       "segment, pose, obb trainings")
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "yolodoctor", "diagnose",
                        str(ROOT / "fixtures/profiles/cpu-classify-png-decode"), "--explain"], capture_output=True,
                       text=True, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"}, timeout=120)
    section = p.stdout.partition("Not for this training's task")[2]
    assert "DL207: a classify training; it applies to detect, segment, pose, obb trainings" in section


def test_a_rule_names_only_ultralytics_tasks(tmp_path):
    import pytest

    from yolodoctor.diagnosis.rules import RuleError, load_rules

    (tmp_path / "XX201-x.yaml").write_text(
        "id: XX201\nname: x\ncategory: config\nseverity: info\ntasks: [detection]\nfacts: [run.batch]\n"
        "condition: run.batch > 1.0\nmessage: m\ndocs: {what: w, why: y, fix: f}\n")
    with pytest.raises(RuleError, match="unknown task"):
        load_rules([tmp_path], builtin=False)


def test_a_users_rule_may_not_take_the_bound_category(tmp_path):
    import pytest

    from yolodoctor.diagnosis.rules import RuleError, load_rules

    (tmp_path / "XX202-x.yaml").write_text(
        "id: XX202\nname: x\ncategory: bound\nseverity: info\nfacts: [run.batch]\n"
        "condition: run.batch > 1.0\nmessage: m\ndocs: {what: w, why: y, fix: f}\n")
    for bound in (False, True):
        with pytest.raises(RuleError, match="category bound is yolodoctor's own"):
            load_rules([tmp_path], bound=bound)
