"""bench/scenarios.py: the grid is fixed in the repo, the stages resume where they stopped, and the table's goals are
judged from the collected records."""

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import scenarios as sc

ROOT = Path(__file__).resolve().parents[2]


def test_the_matrix_spans_the_shapes_and_bottlenecks_asked_for():
    rows = sc.load()
    assert len(rows) >= 8 and len({r["name"] for r in rows}) == len(rows)
    images = [r["dataset"]["images"] for r in rows]
    epochs = [r["args"]["epochs"] for r in rows]
    assert min(images) <= 1000 and max(images) >= 20000 and min(epochs) == 1 and max(epochs) >= 20
    assert any(r["bottleneck"].startswith("none") for r in rows)
    assert all(r["grid"] and all(isinstance(g, dict) and g for g in r["grid"]) for r in rows)


def test_a_stage_runs_detached_once_and_is_not_restarted_while_it_runs(tmp_path):
    cmd = f"sleep 0.5; echo ran >> {tmp_path}/count"
    assert sc.step(tmp_path, "grid", cmd) is False  # started
    assert sc.step(tmp_path, "grid", cmd) is False  # running: not started again
    for _ in range(100):
        if sc.step(tmp_path, "grid", cmd):
            break
        time.sleep(0.1)
    assert (tmp_path / "grid.rc").read_text().strip() == "0"
    assert (tmp_path / "count").read_text() == "ran\n"
    assert json.loads((tmp_path / "grid.time.json").read_text())["seconds"] >= 0
    assert sc.step(tmp_path, "grid", cmd) is True  # ended: a later call goes on to the next stage


def record(d: Path, name: str, rate: float, wall: float, steady: bool = True) -> None:
    (d / f"{name}.profile.json").write_text(json.dumps({"summary": {"images_per_s": rate, "phases": {"total": wall},
                                                                    "window": {"valid": steady}}}))


def scenario(tmp_path, *, epochs=20, bottleneck="too few workers", kept=True, applied_rate=900.0, applied_wall=500.0,
             verify=100.0):
    d = tmp_path / "s"
    d.mkdir()
    (d / "scenario.json").write_text(json.dumps({"name": "s", "bottleneck": bottleneck, "args": {"epochs": epochs},
                                                 "grid": [{"workers": 8}, {"workers": 15}]}))
    (d / "profile.out.json").write_text(json.dumps({"findings": [{"id": "DL201"}]}))
    fix = {"plan": {"changes": [{"key": "workers", "after": 15}, {"key": "batch", "after": 64}]},
           "trials": {"kept": [{"key": "workers", "after": 15}] if kept else [], "wall_s": verify,
                      "baseline_spread": 0.05},
           "verify": {"fits": True},
           "applied": {"relaunched": kept, "verified": True,
                       "changes": [{"key": "workers", "after": 15}] if kept else []}}
    (d / "fix.json").write_text(json.dumps(fix))
    record(d, "original", 200.0, 1000.0)
    record(d, "grid-0", 600.0, 0)
    record(d, "grid-1", 950.0, 0)
    if kept:
        record(d, "applied", applied_rate, applied_wall)
    return sc.read(d)


def test_goals_are_judged_against_the_best_swept_point_and_the_time_saved(tmp_path):
    r = scenario(tmp_path)
    assert r["best"] == ("workers=15", 950.0) and r["kept"] == ["workers=15"]
    assert sc.goals(r) == ["best met", "not slower met", "verify <= 25% of saved met"]  # 900/950; 100 s of 500 saved
    row = sc.row_text(r)
    assert "| DL201 | workers=15, batch=64 | workers=15 | workers=15 (as measured) |" in row
    assert "4.50x (200 -> 900)" in row and "2.00x (1000 -> 500 s)" in row


def test_a_grid_point_whose_window_is_not_steady_is_named_but_not_held_as_the_best(tmp_path):
    scenario(tmp_path)
    record(tmp_path / "s", "grid-1", 1400.0, 0, steady=False)  # a window the loader's queue still fed
    r = sc.read(tmp_path / "s")
    assert r["best"] == ("workers=8", 600.0) and sc.goals(r)[0] == "best met"
    assert "1.50x of workers=8 (not steady, left out: workers=15 1400) |" in sc.row_text(r)
    record(tmp_path / "s", "grid-0", 600.0, 0, steady=False)
    record(tmp_path / "s", "original", 200.0, 1000.0, steady=False)
    r = sc.read(tmp_path / "s")  # no steady point at all: no best to judge against
    assert r["best"] == (None, None) and not any(g.startswith("best") for g in sc.goals(r))


def test_missed_goals_are_named(tmp_path):
    r = scenario(tmp_path, applied_rate=800.0, applied_wall=1100.0, verify=300.0)
    assert sc.goals(r) == ["best missed", "not slower missed", "verify <= 25% of saved missed"]


def test_a_skipped_verify_on_a_long_training_spent_nothing_on_trials(tmp_path):
    scenario(tmp_path, kept=False, verify=None)
    fix = json.loads((tmp_path / "s" / "fix.json").read_text())
    fix["verify"] = {"fits": False, "trials": 4, "verify_s": 100.0, "budget_s": 41.0}
    (tmp_path / "s" / "fix.json").write_text(json.dumps(fix))
    r = sc.read(tmp_path / "s")
    assert "verify <= 25% of saved met (skipped: 0 s)" in sc.goals(r)
    assert "verify skipped: 4 trials, about 100 s, against a budget of 41 s" in sc.row_text(r)
    r["epochs"] = 3  # shorter than 10 epochs: the goal does not apply
    assert not any(g.startswith("verify") for g in sc.goals(r))


def test_a_well_tuned_training_must_keep_nothing(tmp_path):
    r = scenario(tmp_path, epochs=2, bottleneck="none (already well tuned)", kept=False)
    assert r["app_rate"] == 200.0 and r["app_wall"] == 1000.0  # nothing relaunched: the original stands
    assert "nothing applied met" in sc.goals(r) and not any(g.startswith("verify") for g in sc.goals(r))


def test_export_leaves_two_archives_whatever_the_number_of_files(tmp_path, monkeypatch):
    import tarfile

    results, work = tmp_path / "results", tmp_path / "work"
    for i in range(12):  # many records: all of them in one archive
        (results / "a").mkdir(parents=True, exist_ok=True)
        (results / "a" / f"grid-{i}.profile.json").write_text("{}")
    (work / "scenarios" / "a").mkdir(parents=True)
    (work / "scenarios" / "a" / "fix.log").write_text("log")
    (work / "scenarios" / "a" / "trace.json.gz").write_bytes(b"x")  # not a stage's record: left out
    (work / "scenarios" / "a" / "fix-profile").mkdir()
    (work / "scenarios" / "a" / "fix-profile" / "profile.json").write_text("{}")  # a finished run's record: kept
    (work / "scenarios" / "a" / "fix-profile" / "steps.jsonl").write_text("{}")  # no stream the product writes
    (work / "scenarios" / "a" / "fix-profile" / "events.jsonl").write_text("{}")  # its step events: kept
    (work / "scenarios" / "a" / "fix-profile" / "events-rank1.jsonl").write_text("{}")  # a rank's: kept
    (work / "scenarios" / "a" / "fix-profile" / "samples.jsonl").write_text("{}")  # its samples: kept
    (work / "scenarios" / "a" / "fix-profile" / "output.log").write_text("x")  # Ultralytics' console: left out
    monkeypatch.setattr(sc, "RESULTS", results)
    monkeypatch.setattr(sc, "WORK", work)
    monkeypatch.setattr(sc, "load", lambda: [])
    sc.export(tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["scenarios.tgz", "stages.tgz"]
    with tarfile.open(tmp_path / "out" / "scenarios.tgz") as t:
        assert len([m for m in t.getnames() if m.endswith(".profile.json")]) == 12
    with tarfile.open(tmp_path / "out" / "stages.tgz") as t:
        assert t.getnames() == ["scenarios/a/fix-profile/events-rank1.jsonl", "scenarios/a/fix-profile/events.jsonl",
                                "scenarios/a/fix-profile/profile.json", "scenarios/a/fix-profile/samples.jsonl",
                                "scenarios/a/fix.log"]


def test_export_collects_again_what_an_earlier_call_finished(tmp_path, monkeypatch):
    """On a machine kept between calls the tree's copy puts the committed results back: a scenario whose stages all
    ended in an earlier call is collected again, with its runs' step events, so every call's archive holds it."""
    import gzip
    import tarfile

    results, work = tmp_path / "results", tmp_path / "work"
    row = {"name": "a", "grid": [{"workers": 15}]}
    d = work / "scenarios" / "a"
    for run in ("profile", "original", "grid-0"):
        (d / run).mkdir(parents=True)
        (d / run / "profile.json").write_text(json.dumps({"created": "2026-12-07T22:00:00", "run": run}))
        (d / run / "events.jsonl").write_text(json.dumps({"type": "step", "n": 0, "run": run}) + "\n")
        (d / run / "samples.jsonl").write_text(json.dumps({"type": "sampler_start", "cpu_count": 16}) + "\n")
    (d / "fix.json").write_text("{}")
    monkeypatch.setattr(sc, "RESULTS", results)
    monkeypatch.setattr(sc, "WORK", work)
    monkeypatch.setattr(sc, "load", lambda: [row])
    (results / "a").mkdir(parents=True)
    (results / "a" / "machine.json").write_text(json.dumps({"code": "other"}))  # the committed row, other code
    (results / "a" / "scenario.json").write_text(json.dumps(row))
    assert sc.finished() == []  # a stage still runs (no fix.rc yet): nothing to collect
    for st in sc.STAGES:
        (d / f"{st}.rc").write_text("0")
    sc.export(tmp_path / "out")
    assert sc.current("a") and sc.finished() == []  # collected once; on this code now
    with gzip.open(results / "a" / "grid-0.events.jsonl.gz", "rt") as fh:
        assert json.loads(fh.readline())["run"] == "grid-0"
    with tarfile.open(tmp_path / "out" / "scenarios.tgz") as t:
        names = t.getnames()
    assert {"scenarios/a/original.profile.json", "scenarios/a/original.events.jsonl.gz",
            "scenarios/a/original.samples.jsonl.gz"} <= set(names)
    assert json.loads((results / "a" / "machine.json").read_text())["cpus"] == 16  # the original's sampler saw them


def test_an_unverified_apply_and_a_combination_other_than_the_measured_are_named(tmp_path):
    scenario(tmp_path)
    fix = json.loads((tmp_path / "s" / "fix.json").read_text())
    fix["applied"]["changes"].append({"key": "cache", "after": "ram"})
    (tmp_path / "s" / "fix.json").write_text(json.dumps(fix))
    assert "workers=15, cache=ram (not as measured)" in sc.row_text(sc.read(tmp_path / "s"))
    fix["verify"] = {"fits": False}
    fix["trials"] = []
    (tmp_path / "s" / "fix.json").write_text(json.dumps(fix))
    row = sc.row_text(sc.read(tmp_path / "s"))
    assert "| verify skipped (budget) | workers=15, cache=ram (unverified) |" in row
    fix["verify"] = {"fits": False, "trials": 4, "verify_s": 156.0, "budget_s": 25.4}
    (tmp_path / "s" / "fix.json").write_text(json.dumps(fix))
    row = sc.row_text(sc.read(tmp_path / "s"))
    assert "| verify skipped: 4 trials, about 156 s, against a budget of 25 s | workers=15" in row


def test_the_original_is_recorded_as_lightly_as_the_applied_run(tmp_path):
    from yolodoctor.fixing.apply import LIGHT_HZ

    cmd = sc.stage_commands(sc.load()[0], tmp_path)["original"]
    assert f"--sample-hz {LIGHT_HZ:g}" in cmd and "--no-trace" in cmd and "--all" in cmd


def test_a_rolled_back_apply_and_a_window_that_is_not_steady_are_said_not_hidden(tmp_path):
    scenario(tmp_path)
    d = tmp_path / "s"
    fix = json.loads((d / "fix.json").read_text())
    fix["applied"] = {"relaunched": True, "rolled_back": True, "changes": [],
                      "rollback_reason": "plan failed: crashed: RuntimeError: CUDAGraphs. Stack trace: ..."}
    (d / "fix.json").write_text(json.dumps(fix))
    row = sc.row_text(sc.read(d))
    assert "nothing: rolled back to the original arguments (plan failed: crashed: RuntimeError: CUDAGraphs)" in row
    fix["applied"] = {"relaunched": True, "changes": [{"key": "workers", "after": 15}]}
    (d / "fix.json").write_text(json.dumps(fix))
    (d / "applied.profile.json").write_text(json.dumps({"summary": {
        "images_per_s": 232.0, "phases": {"total": 71.0}, "window": {"valid": False}, "bounded": False,
        "images": 6048, "training_s": 21.6}}))
    r = sc.read(d)
    assert "best not measured (the applied training's window is not steady)" in sc.goals(r)
    assert "not steady; 280 over all its training steps" in sc.row_text(r)


def test_measured_stage_costs_are_kept_with_the_scenarios():
    costed = [s for s in sc.load() if s.get("cost_s")]
    assert costed and all(set(s["cost_s"]) <= set(sc.STAGES) and min(s["cost_s"].values()) > 0 for s in costed)
    assert any(sc.cost(s) is not None for s in costed)


def test_benchmarks_shows_the_matrix_as_its_results_give_it(capsys):
    sc.report(sc.RESULTS)
    table = capsys.readouterr().out.strip().split("\n\n")[0]
    assert table.count("\n") >= 3 and table in (ROOT / "BENCHMARKS.md").read_text()


def test_the_plan_and_the_budget_follow_the_measured_costs(tmp_path, monkeypatch, capsys):
    rows = [{"name": "a", "cost_s": {"profile": 100, "grid": 100, "fix": 50, "original": 50}, "grid": [{}]},
            {"name": "b", "cost_s": {"profile": 300, "grid": 200, "fix": 100, "original": 0}, "grid": [{}]},
            {"name": "c", "grid": [{}]}, {"name": "d", "cost_s": {"profile": 140, "grid": 194}, "grid": [{}]}]
    monkeypatch.setattr(sc, "load", lambda path=None: rows)
    monkeypatch.setattr(sc, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(sc, "WORK", tmp_path / "work")
    assert sc.plan(500) == ["a: 300 s - fits", "b: 600 s (over the 8-minute limit) - does not fit",
                            "c: not measured yet - runs if time is left",  # a part measured is no cost yet:
                            "d: not measured yet (profile 140 s, grid 194 s so far) - runs if time is left"]
    started = []
    monkeypatch.setattr(sc, "step", lambda d, stage, cmd: started.append((d.name, stage)) or True)
    monkeypatch.setattr(sc, "stage_commands", lambda s, d: {k: "true" for k in sc.STAGES})
    monkeypatch.setattr(sc, "collect", lambda s, d, dest: None)
    monkeypatch.setattr(sc, "row_text", lambda r: "")
    monkeypatch.setattr(sc, "read", lambda d: {})
    rows.pop()
    for name in "abc":
        d = tmp_path / "work" / "scenarios" / name
        d.mkdir(parents=True)
        for st in sc.STAGES:
            (d / f"{st}.rc").write_text("0")
    assert sc.run(None, 60, budget_s=500) == 0
    assert {n for n, _ in started} == {"a", "c"}  # b's 600 s exceed the budget: not started
    assert "b: not started" in capsys.readouterr().out


def test_a_scenario_finished_on_this_code_runs_again_only_when_asked_and_is_replaced(tmp_path, monkeypatch):
    rows = [{"name": "a", "grid": [{}]}]
    monkeypatch.setattr(sc, "load", lambda path=None: rows)
    monkeypatch.setattr(sc, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(sc, "WORK", tmp_path / "work")
    kept = tmp_path / "results" / "a"
    kept.mkdir(parents=True)
    (kept / "scenario.json").write_text("{}")
    (kept / "machine.json").write_text(json.dumps({"code": sc.code_version()}))
    (kept / "old.profile.json").write_text("{}")
    started = []
    monkeypatch.setattr(sc, "step", lambda d, stage, cmd: started.append(stage) or True)
    monkeypatch.setattr(sc, "stage_commands", lambda s, d: {k: "true" for k in sc.STAGES})
    monkeypatch.setattr(sc, "read", lambda d: {})
    monkeypatch.setattr(sc, "row_text", lambda r: "")
    d = tmp_path / "work" / "scenarios" / "a"
    d.mkdir(parents=True)
    for st in sc.STAGES:
        (d / f"{st}.rc").write_text("0")
    assert sc.run(None, 60) == 0 and started == []
    assert sc.run(None, 60, again=("a",)) == 0 and started == list(sc.STAGES)
    assert (kept / "scenario.json").exists() and not (kept / "old.profile.json").exists()


def stages_run(monkeypatch) -> list[str]:
    """Stages that end at once (each leaves its return code), nothing collected; the scenario of each stage run, in
    order."""
    started: list[str] = []

    def step(d, stage, cmd):
        started.append(d.name)
        (d / f"{stage}.rc").write_text("0")
        return True

    monkeypatch.setattr(sc, "step", step)
    monkeypatch.setattr(sc, "stage_commands", lambda s, d: {k: "true" for k in sc.STAGES})
    monkeypatch.setattr(sc, "collect", lambda *a: None)
    monkeypatch.setattr(sc, "read", lambda d: {})
    monkeypatch.setattr(sc, "row_text", lambda r: "")
    return started


def test_only_runs_the_named_scenarios_in_the_order_given(tmp_path, monkeypatch):
    monkeypatch.setattr(sc, "load", lambda path=None: [{"name": n, "grid": [{}]} for n in "abc"])
    monkeypatch.setattr(sc, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(sc, "WORK", tmp_path / "work")
    started = stages_run(monkeypatch)
    assert sc.run(["c", "a"], 60) == 0
    assert list(dict.fromkeys(started)) == ["c", "a"]


def test_a_collected_scenario_names_the_machine_it_ran_on(tmp_path):
    m = sc.machine(ROOT / "fixtures" / "profiles" / "h100-b128w14-cache-ram")
    assert m["gpu"] == "NVIDIA H100 80GB HBM3" and m["cpus"] == 16 and m["date"].startswith("20")
    d = tmp_path / "a"
    d.mkdir()
    (d / "scenario.json").write_text('{"name": "a", "bottleneck": "x", "grid": []}')
    (d / "machine.json").write_text(json.dumps(m))
    assert sc.read(d)["machine"] == f"H100 80GB HBM3, 16 CPUs, {m['date']}, code {sc.code_version()}"
    assert sc.machine(tmp_path / "none") == {"gpu": None, "cpus": None, "date": None, "code": sc.code_version()}


def test_a_scenario_measured_on_other_code_is_planned_and_run_again(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sc, "load", lambda path=None: [{"name": n, "grid": [{}], "bottleneck": "x"} for n in "ab"])
    monkeypatch.setattr(sc, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(sc, "WORK", tmp_path / "work")
    for name, code in (("a", sc.code_version()), ("b", "0123456789ab")):
        (tmp_path / "results" / name).mkdir(parents=True)
        (tmp_path / "results" / name / "scenario.json").write_text(json.dumps({"name": name, "grid": [{}]}))
        (tmp_path / "results" / name / "machine.json").write_text(json.dumps({"code": code}))
    assert sc.current("a") and not sc.current("b")
    assert sc.plan() == ["b: not measured yet, ran on other code"]
    sc.report(tmp_path / "results")
    out = capsys.readouterr().out
    assert f"code {sc.code_version()}" in out and f"other code than this tree's ({sc.code_version()}): b." in out
    started = stages_run(monkeypatch)
    sc.run(None, 60)
    assert set(started) == {"b"}


def test_the_code_version_follows_the_products_code(tmp_path, monkeypatch):
    (tmp_path / "yolodoctor").mkdir()
    (tmp_path / "rules").mkdir()
    (tmp_path / "yolodoctor" / "a.py").write_text("x = 1\n")
    (tmp_path / "rules" / "r.yaml").write_text("rules: []\n")
    monkeypatch.setattr(sc, "ROOT", tmp_path)
    v = sc.code_version()
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "b.py").write_text("y = 2\n")  # the runner is not the product
    assert sc.code_version() == v
    (tmp_path / "rules" / "r.yaml").write_text("rules: [1]\n")
    assert sc.code_version() != v
