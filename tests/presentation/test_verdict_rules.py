"""The headline's bound comes from the rules: a finding that names what bounds the step and the headline never
disagree, and the bound rules (rules/BD*.yaml) exclude each other - on the recorded profiles and on generated
facts spanning the thresholds."""

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from yolodoctor.diagnosis.diagnose import diagnose
from yolodoctor.diagnosis.engine import evaluate
from yolodoctor.diagnosis.rules import bound_rules, builtin_rules
from yolodoctor.presentation.verdict import verdict

PROFILES = Path(__file__).resolve().parents[2] / "fixtures" / "profiles"

# what each finding says bounds the step, where it says one
SAYS = {"DL201": "input", "DL202": "input", "DL203": "input", "DL204": "input", "DD201": "input",
        "LA201": "host", "LA203": "host", "DL205": "host"}


def agree(facts, findings, v):
    """The findings that name a bound name the headline's (a memory finding that costs more time may come first
    where the bound is not the input)."""
    said = {SAYS[x.id] for x in findings if x.id in SAYS}
    if v.bound == "memory":
        return "input" not in said
    return said <= {v.bound}


facts_strategy = st.fixed_dictionaries({
    "run.device": st.sampled_from(["cuda", "cpu"]),
    "run.data_wait_share": st.floats(0.0, 0.9),
    "gpu.util_mean": st.floats(0.0, 100.0),
    "trace.gpu_busy_share": st.floats(0.0, 1.0),
    "loader.headroom": st.floats(0.5, 3.0),
    "run.batch": st.sampled_from([4.0, 16.0, 32.0, 64.0, 128.0]),
    "gpu.mem_fraction_peak": st.floats(0.02, 0.99),
    "cpu.saturated_share": st.floats(0.0, 1.0),
    "cpu.train_thread_pct": st.floats(10.0, 100.0),
    "settings.workers": st.sampled_from([0.0, 2.0, 8.0, 15.0]),
    "cpu.iowait_pct": st.floats(0.0, 30.0),
    "check.decode_ms": st.floats(1.0, 40.0),
})


@settings(max_examples=300, deadline=None)
@given(facts_strategy)
def test_a_finding_that_names_the_bound_and_the_headline_never_disagree(drawn):
    facts = {"settings.nbs": 64.0, "run.epoch_s": 100.0, "run.step_s": 0.1, "run.ranks": 1.0, "cpu.count": 16.0,
             "cpu.usable": 16.0, "run.compute_s": 0.05, "loader.capacity_images_per_s": 500.0,
             "check.cache_ram_fits": True, "run.complete": True, "run.window_valid": True, **drawn}
    findings = evaluate(builtin_rules(), facts)[0]
    v = verdict(facts, findings, "runs/x")
    assert agree(facts, findings, v), (v.bound, [x.id for x in findings])
    assert len(evaluate(bound_rules(), facts)[0]) <= 1  # the bound rules exclude each other
    if facts["run.data_wait_share"] <= 0.15 and v.bound != "memory":
        assert v.bound == ("cpu" if facts["run.device"] == "cpu" else "host" if facts["gpu.util_mean"] < 60 else "gpu")


def test_the_recorded_profiles_headlines_agree_with_their_findings():
    seen = set()
    for d in sorted(p for p in PROFILES.iterdir() if (p / "profile.json").exists()):
        diag = diagnose(d)
        v = verdict(diag.facts, diag.reported, diag.run_dir, diag.profile)
        assert agree(diag.facts, diag.reported, v), (d.name, v.bound, [x.id for x in diag.reported])
        seen.add(v.bound)
    assert {"input", "host", "gpu", "memory"} <= seen


def test_bound_rules_are_not_reported_as_findings():
    facts = {"run.device": "cuda", "run.data_wait_share": 0.5}
    assert [x.id for x in evaluate(bound_rules(), facts)[0]] == ["BD201"]
    assert not any(c.rule.category == "bound" for c in builtin_rules())
    d = diagnose(PROFILES / "h200-workers0")
    assert not any(x.category == "bound" for x in d.reported)
