"""bench/h200_benchmark.py and bench/report_h200.py without training: the grid, the digest of a run directory, the
resumable bookkeeping (budget, skip, redo, detached fix), and the report's figures on synthetic results."""

import argparse
import json
import os
import sys
from dataclasses import asdict, fields
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import common
import h200_benchmark as hb
import report_h200 as rep

ROOT = Path(__file__).resolve().parents[2]

KNOBS = ("batch", "workers", "amp", "compile", "cache")


# ---------------------------------------------------------------------------------------------------------- grid
def test_grid_covers_every_knob_level_in_a_small_fraction():
    g = hb.grid()
    assert 12 <= len(g) <= 16 and len({c.name for c in g}) == len(g)
    assert g[0] == hb.DEFAULTS and g[0].args() == {"batch": 16, "workers": 8}
    levels = {k: {getattr(c, k) for c in g} for k in KNOBS}
    assert {64, 128} <= levels["batch"] and levels["workers"] == {8, 16} and levels["amp"] == {"fp16", "bf16"}
    assert levels["compile"] == {False, True, "reduce-overhead"} and levels["cache"] == {False, "ram"}
    for knob in KNOBS:  # each knob's effect is readable from a pair of configurations one knob apart
        pairs = [(a.name, b.name) for a in g for b in g if getattr(a, knob) != getattr(b, knob)
                 and all(getattr(a, k) == getattr(b, k) for k in KNOBS if k != knob)]
        assert pairs, f"no pair of grid points differs in {knob} alone"
    assert all(c.why for c in g)


def test_tiny_grid_maps_and_dedupes():
    g = hb.grid(tiny=True)
    args = [json.dumps(c.args(True), sort_keys=True) for c in g]
    assert len(set(args)) == len(args) < len(hb.GRID)
    assert all("compile" not in c.args(True) and "amp" not in c.args(True) for c in g)
    assert {c.args(True)["batch"] for c in g} == {2, 4, 8}
    assert [c.name for c in hb.grid(names=["b64-w16", "b128-w16-ro"])] == ["b64-w16", "b128-w16-ro"]
    assert hb.words({"batch": 64, "compile": "reduce-overhead", "cache": False}) == \
        ["batch=64", "compile=reduce-overhead", "cache=False"]


# ---------------------------------------------------------------------------------------------------------- digest
def write_run(run: Path, *, batch=16, steps=60, step_s=0.1, slow=0.3, accumulate=4, loss=2.0, workers=0):
    """A run directory as `yolodoctor profile` writes it: the first 20 steps slow, then steady, one epoch."""
    run.mkdir(parents=True)
    ev = [{"type": "run_start", "t": 0.0}, {"type": "epoch_start", "t": 5.0, "epoch": 0}]
    t = 5.0
    for n in range(steps):
        d = slow if n < 20 else step_s
        ev.append({"type": "step", "epoch": 0, "i": n, "step": n, "n": n, "t0": t + 0.01, "t1": t + d,
                   "wait": 0.01, "compute": d - 0.01, "images": batch, "batch": batch, "accumulate": accumulate,
                   "loss": loss * batch})
        t += d
    ev += [{"type": "epoch_end", "t": t, "epoch": 0, "seconds": t - 5.0, "steps": steps},
           {"type": "fit_epoch_end", "t": t + 2.0, "epoch": 0}, {"type": "run_end", "t": t + 3.0}]
    (run / "events.jsonl").write_text("\n".join(map(json.dumps, ev)) + "\n{\"type\": \"ste")  # a cut-off last line
    (run / "profile.json").write_text(json.dumps({"status": "complete", "settings": {
        "batch": batch, "workers": workers, "prefetch_factor": 4 if workers else None, "compile_active": False},
        "summary": {"images_per_s": 1.0, "window": {"valid": True}}}))


def test_digest_steady_rate_excess_setup_epochs_and_optimizer_steps(tmp_path):
    write_run(tmp_path / "r", batch=16, steps=60, step_s=0.1, slow=0.3, accumulate=4, loss=2.0)
    d = hb.digest(tmp_path / "r", curve=True)
    assert d["steady_ips"] == pytest.approx(160.0) and d["steady_steps"] == 40
    assert d["compute_s"] == pytest.approx([0.09, 0.09, 0.09])  # p10, median, p90 of the step's own work
    assert d["first_steps_excess_s"] == pytest.approx(20 * 0.3 - 20 * 0.1)
    assert d["setup_s"] == pytest.approx(5.0)
    assert d["epochs"] == [{"epoch": 0, "train_s": pytest.approx(10.0), "steps": 60, "val_s": pytest.approx(2.0),
                            "images": 960}]
    assert d["loss_per_opt_step"] == [2.0] * 15  # 60 micro-batches / accumulate 4, loss per image
    assert "facts" in d or "facts_error" in d


def test_opt_curve_follows_accumulate_as_ultralytics_does():
    steps = [{"step": n, "n": n, "accumulate": acc, "loss": float(n), "images": 1}
             for n, acc in enumerate([1, 1, 2, 2, 2, 2, 4, 4, 4, 4])]
    # steps at ni 0, 1, 3, 5, 9 (ni - last >= accumulate); each averages its micro-batches since the last one
    assert hb.opt_curve(steps) == [0.0, 1.0, 2.5, 4.5, 7.5]


# ---------------------------------------------------------------------------------------------------------- runner
def namespace(tmp_path, budget=100.0, redo=None):
    return argparse.Namespace(scale=hb.TINY, work=str(tmp_path / "w"), results=str(tmp_path / "r"), budget_s=budget,
                              redo=redo, fix_try=None, grid=None, spread_config="b64-w16",
                              compile_config="b64-w16-ro", parts=["sweep"], max_reps=None)


@pytest.fixture
def fake(monkeypatch):
    """Four sweep units of 40 (fake) seconds each; the dataset is there; calls are counted."""
    calls = []
    monkeypatch.setattr(hb, "machine", lambda: {"machine_id": "L1", "host": "h", "gpu": None})

    def units(self, part):
        if part != "sweep":
            return []

        def run(name):
            def fn():
                if name == "u4" and fake.not_yet:
                    raise hb.NotYet("still running")
                calls.append(name)
                self.t0 -= 40  # 40 s go by
                return {"status": "complete", "steady_ips": 100.0, "wall_s": 40}
            return fn
        return [hb.Unit(n, "bounded", run(n)) for n in ("u1", "u2", "u3", "u4")]

    monkeypatch.setattr(hb.Runner, "units", units)
    fake.calls, fake.not_yet = calls, False
    return fake


def test_budget_stops_cleanly_and_a_rerun_resumes(tmp_path, fake):
    assert hb.cmd_run(namespace(tmp_path, budget=100)) == hb.CALL_AGAIN
    assert fake.calls == ["u1", "u2"]  # 100 s: u1 (est 30), u2 (est 40 from u1); 20 s left < 40: stop
    doc = json.loads((tmp_path / "r" / "sweep.json").read_text())
    assert list(doc["units"]) == ["u1", "u2"] and doc["scale"] == asdict(hb.TINY)
    assert doc["units"]["u1"]["machine"]["machine_id"] == "L1" and doc["units"]["u1"]["kind"] == "bounded"
    probe = doc["units"]["u1"]["host_probe"]  # the host's speed around the unit
    assert probe["before"]["python_ms"] > 0 and probe["after"]["jpeg_decode_ms"] > 0
    assert hb.cmd_run(namespace(tmp_path, budget=100)) == 0
    assert fake.calls == ["u1", "u2", "u3", "u4"]  # finished units are not run again
    assert hb.cmd_run(namespace(tmp_path, budget=100, redo=["sweep/u2"])) == 0
    assert fake.calls[4:] == ["u2"]


def test_a_unit_still_running_detached_is_not_recorded(tmp_path, fake):
    fake.not_yet = True
    assert hb.cmd_run(namespace(tmp_path, budget=1000)) == hb.CALL_AGAIN
    assert list(json.loads((tmp_path / "r" / "sweep.json").read_text())["units"]) == ["u1", "u2", "u3"]


def test_results_of_another_scale_are_refused(tmp_path, fake):
    hb.write_json(tmp_path / "r" / "sweep.json", {"part": "sweep", "scale": asdict(hb.Scale()), "units": {}})
    with pytest.raises(SystemExit) as e:
        hb.cmd_run(namespace(tmp_path))
    assert e.value.code == 2


def test_fix_part_adds_a_defaults_run_on_a_new_machine_and_collects_a_newer_fix(tmp_path, monkeypatch):
    monkeypatch.setattr(hb, "machine", lambda: {"machine_id": "NEW", "host": "h", "gpu": None})
    rec = {"status": "complete", "steady_ips": 200.0, "machine": {"machine_id": "OLD"}}
    hb.write_json(tmp_path / "r" / "defaults.json", {"part": "defaults", "scale": asdict(hb.TINY),
                                                     "units": {"defaults": rec}})
    r = hb.Runner(namespace(tmp_path))
    assert [u.name for u in r.units("fix-safe")] == ["fix", "defaults"]
    monkeypatch.setattr(hb, "machine", lambda: {"machine_id": "OLD", "host": "h", "gpu": None})
    r = hb.Runner(namespace(tmp_path))
    assert [u.name for u in r.units("fix-safe")] == ["fix"]
    hb.write_json(tmp_path / "r" / "fix-safe.json", {"part": "fix-safe", "scale": asdict(hb.TINY),
                                                     "units": {"fix": {"driver_pid": 11, "machine": {}}}})
    hb.write_json(tmp_path / "w" / "fix-safe" / "fix.pid", {"pid": 12, "machine_id": "OLD"})
    r = hb.Runner(namespace(tmp_path))
    assert [u.name for u in r.units("fix-safe")] == ["fix"] and not r.done("fix-safe", "fix")
    # a fix recorded on this machine whose defaults run was cut off (the command's time ran out): the
    # defaults run comes next, and a fix recorded on another machine gets none
    monkeypatch.setattr(hb, "machine", lambda: {"machine_id": "NEW", "host": "h", "gpu": None})
    hb.write_json(tmp_path / "r" / "fix-safe.json", {"part": "fix-safe", "scale": asdict(hb.TINY),
                                                     "units": {"fix": {"driver_pid": 12,
                                                                       "machine": {"machine_id": "NEW"}}}})
    r = hb.Runner(namespace(tmp_path))
    assert [u.name for u in r.units("fix-safe")] == ["fix", "defaults"] and r.done("fix-safe", "fix")
    assert not r.done("fix-safe", "defaults")
    monkeypatch.setattr(hb, "machine", lambda: {"machine_id": "THIRD", "host": "h", "gpu": None})
    assert [u.name for u in hb.Runner(namespace(tmp_path)).units("fix-safe")] == ["fix"]


def test_redo_is_honoured_once_a_machine(tmp_path, fake, monkeypatch):
    # a fourth `fix-unsafe --redo fix-unsafe/fix` command, after the third had recorded the fix, used to start the
    # 24-minute fix again; the same command again now goes on from where the last one stopped
    assert hb.cmd_run(namespace(tmp_path, budget=1000)) == 0
    assert hb.cmd_run(namespace(tmp_path, budget=60, redo=["sweep/u2", "sweep/u4"])) == hb.CALL_AGAIN
    assert fake.calls[4:] == ["u2"]  # 60 s: u2 (40), then not u4
    assert hb.cmd_run(namespace(tmp_path, budget=100, redo=["sweep/u2", "sweep/u4"])) == 0
    assert fake.calls[5:] == ["u4"]  # u2 was redone on this machine already
    assert json.loads((tmp_path / "w" / "redone.json").read_text()) == {"sweep/u2": "L1", "sweep/u4": "L1"}
    monkeypatch.setattr(hb, "machine", lambda: {"machine_id": "L2", "host": "h", "gpu": None})
    assert hb.cmd_run(namespace(tmp_path, budget=1000, redo=["sweep/u2"])) == 0  # another machine: again
    assert fake.calls[6:] == ["u2"]


def test_a_redone_fix_is_collected_by_the_next_calls_not_started_again(tmp_path, monkeypatch):
    # the fix is marked redone when it starts: a later call with the same --redo collects it, also where it ended
    # between two calls and was not recorded yet, and once recorded goes on to the defaults run
    monkeypatch.setattr(hb, "machine", lambda: {"machine_id": "NEW", "host": "h", "gpu": None})
    old = {"status": "complete", "driver_pid": 11, "machine": {"machine_id": "OLD"}}
    hb.write_json(tmp_path / "r" / "fix-unsafe.json", {"part": "fix-unsafe", "scale": asdict(hb.TINY),
                                                       "units": {"fix": old}})
    hb.write_json(tmp_path / "w" / "fix-unsafe" / "fix.pid", {"pid": 12, "machine_id": "NEW"})
    hb.write_json(tmp_path / "w" / "redone.json", {"fix-unsafe/fix": "NEW"})  # as the first call left it
    r = hb.Runner(namespace(tmp_path, redo=["fix-unsafe/fix"]))
    assert [u.name for u in r.units("fix-unsafe")] == ["fix", "defaults"]
    assert not r.done("fix-unsafe", "fix") and not r.restart  # collected (pid 12 is not the recorded 11), not restarted
    r.record("fix-unsafe", "fix", {**old, "driver_pid": 12, "machine": {"machine_id": "NEW"}})
    r = hb.Runner(namespace(tmp_path, redo=["fix-unsafe/fix"]))
    assert [u.name for u in r.units("fix-unsafe")] == ["fix", "defaults"]
    assert r.done("fix-unsafe", "fix") and not r.done("fix-unsafe", "defaults")
    # on another machine the same --redo starts it again there
    monkeypatch.setattr(hb, "machine", lambda: {"machine_id": "THIRD", "host": "h", "gpu": None})
    r = hb.Runner(namespace(tmp_path, redo=["fix-unsafe/fix"]))
    r.units("fix-unsafe")
    assert not r.done("fix-unsafe", "fix") and r.restart == {"fix-unsafe/fix"}


def test_max_reps_reaches_fix_through_the_detached_driver(tmp_path, monkeypatch):
    """--max-reps goes to the detached driver, from it to `yolodoctor fix`, and into the record; left out, neither
    command carries it (fix's own default)."""
    monkeypatch.setattr(hb, "machine", lambda: {"machine_id": "L1", "host": "h", "gpu": None})
    cmds = []

    def call(self, cmd, out, log, env=None, new_session=False):
        cmds.append(cmd)
        hb.write_json(self.work / "fix-unsafe" / "fix.done.json",
                      {"rc_profile": 0, "rc_fix": 0, "started_s": 0.0, "ended_s": 5.0})
        return argparse.Namespace(pid=os.getpid(), poll=lambda: None)

    monkeypatch.setattr(hb.Runner, "call", call)
    for max_reps in (3, None):
        r = hb.Runner(argparse.Namespace(**{**vars(namespace(tmp_path)), "max_reps": max_reps}))
        (r.work / "fix-unsafe" / "fix.done.json").unlink(missing_ok=True)
        rec = r.fix("fix-unsafe", unsafe=True)
        assert rec["max_reps"] == max_reps and rec["wall_s"] == 5.0
        assert ("--max-reps" in cmds[-1]) == bool(max_reps)
        if max_reps:
            assert cmds[-1][cmds[-1].index("--max-reps") + 1] == "3" and "--unsafe" in cmds[-1]
    r = hb.Runner(namespace(tmp_path, redo=["fix-unsafe/fix"]))  # a fix asked again is marked redone when it starts
    (r.work / "fix-unsafe" / "fix.done.json").unlink()
    r.fix("fix-unsafe", unsafe=True)
    assert json.loads((r.work / "redone.json").read_text()) == {"fix-unsafe/fix": "L1"}
    seen = []
    monkeypatch.setattr(hb.subprocess, "call", lambda cmd, **kw: seen.append(cmd) or 0)
    (tmp_path / "d" / "run").mkdir(parents=True)
    for argv, want in ((["--max-reps", "3"], True), ([], False)):
        hb.main(["_fix", str(tmp_path / "d"), "--reps", "2", *argv, "--unsafe", "--words", "batch=16"])
        fix = seen[-1]
        assert fix[fix.index("fix"):][:4] == ["fix", str(tmp_path / "d" / "run" / "profile"), "--verify", "--apply"]
        assert ("--max-reps" in fix) == want and "--allow-unsafe" in fix
        if want:
            assert fix[fix.index("--max-reps") + 1] == "3"


def test_fix_record_keeps_plan_trials_and_what_was_applied(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    change = {"kind": "args", "key": "batch", "before": 16, "after": 64, "safety": "safe", "reason": "LA201 x"}
    env = {"findings": [{"id": "LA201"}], "plan": {"changes": [change], "dropped": []},
           "trials": {"runs": [{"candidate": "baseline", "run_dir": "/x/trials-profile/baseline-1",
                                "images_per_s": 200.0},
                               {"candidate": "batch=64", "run_dir": str(tmp_path / "batch_64-1"),
                                "images_per_s": 600.0}], "verdicts": [], "kept": [change]},
           "applied": {"status": "complete", "applied": "plan", "rolled_back": False, "run_dir": str(tmp_path / "no"),
                       "changes": [change]}}
    (run / "fix.json").write_text(json.dumps(env))
    r = hb.Runner.fix_record(None, run, {"rc_profile": 0, "rc_fix": 0})
    assert r["kept"] == {"batch": 64} and r["applied"]["args"] == {"batch": 64} and r["findings"] == ["LA201"]
    assert r["trials"]["runs"][0]["run_dir"] == "baseline-1" and r["status"] == "complete"
    # each trial's phases are read from its own events where they are there (not from /x: gone)
    assert r["trials"]["runs"][0]["phases"] is None and r["trials"]["runs"][1]["phases"] is None
    (tmp_path / "batch_64-1").mkdir()
    (tmp_path / "batch_64-1" / "events.jsonl").write_text("\n".join(json.dumps(e) for e in (
        {"type": "run_start", "t": 0.0}, {"type": "train_begin", "t": 7.0}, {"type": "epoch_start", "t": 8.0},
        {"type": "step", "t": 17.0}, {"type": "step", "t": 27.0}, {"type": "run_end", "t": 28.0})))
    r = hb.Runner.fix_record(None, run, {"rc_profile": 0, "rc_fix": 0})
    assert r["trials"]["runs"][1]["phases"]["first_step_s"] == 9.0 and r["trials"]["runs"][1]["run_dir"] == "batch_64-1"
    (run / "fix.json").write_text("")
    assert hb.Runner.fix_record(None, run, {"rc_profile": 0, "rc_fix": 1})["status"] == "failed"


# ---------------------------------------------------------------------------------------------------------- report
def whole(ips, mid="A", loss=1.0, setup=20.0, excess=2.0, n=50, batch=16, workers=8, **kw):
    return {"status": "complete", "steady_ips": ips, "setup_s": setup, "first_steps_excess_s": excess,
            "epochs": [{"epoch": 0, "images": 20000, "val_s": 10.0}], "machine": {"machine_id": mid},
            "settings": {"batch": batch, "workers": workers, "compile_requested": False, "compile_active": False},
            "loss_per_opt_step": [loss + 0.01 * ((i * 7) % 5 - 2) for i in range(n)], "facts": {"gpu.util_mean": 40},
            **kw}


def fix_rec(ips, loss, mid="A", args=None):
    args = args or {"batch": 64}
    return {"status": "complete", "machine": {"machine_id": mid}, "kept": args, "findings": ["LA201"],
            "plan": [{"kind": "args", "key": k, "before": None, "after": v, "safety": "safe", "reason": "R"}
                     for k, v in args.items()],
            "trials": {"runs": [], "verdicts": [{"candidate": "baseline", "median": 200.0}]
                       + [{"candidate": f"{k}={v}", "median": ips} for k, v in args.items()]},
            "applied": {"applied": "plan", "status": "complete", "args": args},
            "applied_run": whole(ips, mid, loss, setup=30.0, excess=130.0, batch=args.get("batch", 16))}


def results(tiny=False):
    scale = asdict(hb.TINY if tiny else hb.Scale())

    def doc(part, units):
        return {"part": part, "scale": scale, "units": units}

    sweep = {"b16-w8": {"config": "b16-w8", **whole(210.0, args={"batch": 16, "workers": 8})},
             "b128-w16-ro": {"config": "b128-w16-ro", **whole(1000.0, args={"batch": 128, "workers": 16})},
             "plan-safe": {"config": "plan-safe", **whole(900.0)}, "plan-unsafe": {"config": "plan-unsafe",
                                                                                   **whole(850.0)}}
    return {"defaults": doc("defaults", {"defaults": whole(200.0)}),
            "fix-safe": doc("fix-safe", {"fix": fix_rec(760.0, 1.0)}),
            "fix-unsafe": doc("fix-unsafe", {"fix": fix_rec(780.0, 1.5, args={"batch": 128})}),
            "sweep": doc("sweep", sweep),
            "spread": doc("spread", {f"spread-{i}": whole(v, config="b64-w16") for i, v in ((1, 700.0), (2, 721.0))}),
            "compile": doc("compile", {"compile": {"config": "b64-w16-ro", "cost_cold_s": 128.0, "cost_warm_s": 31.0,
                                                   "machine": {"machine_id": "A"}}})}


def test_figures_ratios_goals_and_the_100_epoch_time():
    f = rep.figures(results())
    safe, unsafe = f["fix"]["fix-safe"], f["fix"]["fix-unsafe"]
    assert safe["ratio"] == pytest.approx(3.8) and safe["met"] and safe["ratio_machines"] == "one machine"
    assert unsafe["ratio"] == pytest.approx(3.9) and not unsafe["met"]
    assert safe["vs_best"]["ratio"] == pytest.approx(0.9) and safe["vs_best"]["met"]
    assert not unsafe["vs_best"]["met"] and f["best_swept"] == {"name": "b128-w16-ro", "ips": 1000.0}
    # a safe plan is also held against the best configuration it may reach (batch <= 64, no bf16)
    assert safe["vs_best_safe"]["best"] == "b16-w8" and safe["vs_best_safe"]["ratio"] == pytest.approx(900 / 210)
    assert "vs_best_safe" not in unsafe
    assert safe["trial_ratio"] == ("batch=64", pytest.approx(3.8))
    p = safe["planned"]
    assert p["defaults"]["total_s"] == pytest.approx(22 + 100 * (20000 / 200 + 10))
    assert p["plan"]["total_s"] == pytest.approx(160 + 100 * (20000 / 760 + 10))
    assert p["saved_s"] == pytest.approx(p["defaults"]["total_s"] - p["plan"]["total_s"])
    assert f["spread"]["spread"] == pytest.approx(21 / 710.5) and f["spread"]["met"]
    assert safe["loss"]["within"] and not unsafe["loss"]["within"] and safe["loss"]["opt_steps"] == 50
    assert f["compile"]["cost_cold_s"] == 128.0 and f["compile"]["where"] == "machine A"
    # the plan's point and the defaults' point of the sweep: a second reading of applied / defaults, one machine
    assert safe["sweep_ratio"]["ratio"] == pytest.approx(900 / 210) and safe["sweep_ratio"]["met"]
    assert unsafe["sweep_ratio"]["ratio"] == pytest.approx(850 / 210) and unsafe["sweep_ratio"]["met"]
    assert safe["sweep_ratio"]["machines"] == "one machine"
    row = next(r for r in rep.body(results()).splitlines() if r.startswith("| fix-safe: plan / defaults in the sweep"))
    assert "4.29x (210.0 -> 900.0) | yes | bounded, one run each: plan-safe over b16-w8" in row


def test_figures_flag_another_machine_and_partial_results():
    res = results()
    res["fix-safe"]["units"]["fix"]["machine"] = {"machine_id": "B"}
    assert "DIFFERENT" in rep.figures(res)["fix"]["fix-safe"]["ratio_machines"]
    # the goal's verdict itself says it was drawn from two machines
    row = next(r for r in rep.body(res).splitlines() if r.startswith("| fix-safe: applied / defaults"))
    assert row.split(" | ")[3] == "yes (across machines)"
    res["fix-safe"]["units"]["defaults"] = whole(190.0, mid="B")  # its own defaults, run on its machine
    f = rep.figures(res)["fix"]["fix-safe"]
    assert f["ratio_machines"] == "one machine" and f["ratio"] == pytest.approx(760 / 190)
    row = next(r for r in rep.body(res).splitlines() if r.startswith("| fix-safe: applied / defaults"))
    assert row.split(" | ")[3] == "yes"
    del res["spread"], res["compile"]
    res["sweep"]["units"].pop("plan-safe")
    f = rep.figures(res)
    assert "spread" not in f and "whole run" in f["fix"]["fix-safe"]["vs_best"]["how"]
    gone = "\n".join(rep.missing(res))
    assert "spread: spread-1, spread-2" in gone and "compile: compile" in gone and "plan-safe" in gone
    assert "loader" in gone and "defaults" not in gone
    assert rep.body({}).startswith("No results yet")



def test_missing_names_a_fix_without_a_defaults_run_on_its_machine():
    d = {"status": "complete", "steady_ips": 238.0, "machine": {"machine_id": "A"}}
    res = {"defaults": {"units": {"defaults": d}},
           "fix-unsafe": {"units": {"fix": {"status": "complete", "machine": {"machine_id": "B"}}}},
           "fix-safe": {"units": {"fix": {"status": "complete", "machine": {"machine_id": "A"}}}}}
    gone = [x for x in rep.missing(res) if "defaults whole run" in x]
    assert gone == ["fix-unsafe: a defaults whole run on the fix's machine (machine B): applied / defaults compares "
                    "two machines until the part runs again on one (`bash bench/h200_benchmark.sh fix-unsafe --redo "
                    "fix-unsafe/fix --max-reps 2`: two repeats, about 25 minutes)"]
    res["fix-unsafe"]["units"]["defaults"] = {**d, "machine": {"machine_id": "B"}}
    assert not [x for x in rep.missing(res) if "defaults whole run" in x]


def test_report_explains_a_missed_goal_and_writes_its_section(tmp_path, monkeypatch):
    d = tmp_path / "results"
    for part, doc in results().items():
        hb.write_json(d / f"{part}.json", doc)
    text = rep.body(hb.load_results(d))
    assert "Why fix-unsafe missed a goal" in text and "Why fix-safe missed" not in text
    # what the trials did not keep, and the whole plan against what was kept (fix-safe on the H200, 2026-12-03)
    res = results()
    fx = res["fix-safe"]["units"]["fix"]
    fx["plan"].append({"kind": "args", "key": "compile", "before": False, "after": "reduce-overhead",
                       "safety": "safe", "reason": "LA202"})
    fx["trials"]["verdicts"] += [{"candidate": "batch=64+compile=reduce-overhead", "median": 532.0,
                                  "why": "-11.7% is within the noise threshold 52.7%"},
                                 {"candidate": "plan", "median": 1057.0, "runs": 2}]
    fx["trials"]["baseline_spread"] = 0.213
    fx["applied_run"]["facts"] = {"loader.capacity_images_per_s": 1010.0}
    lines = rep.explain(res, "fix-safe", rep.figures(res)["fix"]["fix-safe"])
    assert ("trials: not kept compile='reduce-overhead' (batch=64+compile=reduce-overhead: -11.7% is within the "
            "noise threshold 52.7%)") in lines
    assert "trials: the whole plan ran 1057 img/s (median of 2), what was kept (batch=64) 760 (of -): +39%" in lines
    assert lines[0].startswith("loader: the applied run consumed 760 img/s; the loader alone delivers 1010 img/s")
    best = rep.best_swept(res)
    best.setdefault("args", {}).update(epochs=2, warmup_epochs=0, val=False)  # how a long point ran, not a knob
    diff = next(x for x in rep.explain(res, "fix-safe", {}) if "differs from the plan in" in x)
    assert "differs from the plan in batch=128" in diff and "epochs" not in diff and "val=" not in diff
    # a best point measured on the plan's own sweep machine is set against the plan's point there
    assert "b128-w16-ro (1000 img/s) (machine A; the plan's own point there 900 img/s, 90% of it)" in diff
    res["sweep"]["units"]["b128-w16-ro"]["machine"] = {"machine_id": "C", "gpu": "NVIDIA H100"}
    res["compile"]["units"]["compile"]["machine"] = {"machine_id": "C", "gpu": "NVIDIA H100"}
    lines = rep.explain(res, "fix-safe", {})
    assert "b128-w16-ro (1000 img/s) (machine C, NVIDIA H100) differs" in next(x for x in lines if "differs" in x)
    assert "warm 31.0 s, machine C, NVIDIA H100)" in next(x for x in lines if x.startswith("compile:"))
    assert "### Trials of fix-safe" in text and "| batch=64 |" in text and "bash bench/h200_benchmark.sh" in text
    monkeypatch.setattr(common, "REPORTS", tmp_path / "reports")
    assert rep.main(["--results", str(d), "--write"]) == 0
    written = (tmp_path / "reports" / "h200-benchmark.md").read_text()
    assert written.startswith("## How close") and "3.80x" in written
    for part, doc in results(tiny=True).items():
        hb.write_json(d / f"{part}.json", doc)
    assert rep.main(["--results", str(d), "--write"]) == 2  # tiny figures are never written as a report


def test_scale_fields_are_the_runner_options():
    opts = {f.name for f in fields(hb.Scale)} - {"tiny"}
    ns = argparse.Namespace(tiny=False, **{k: None for k in opts})
    assert hb.scale_of(ns) == hb.Scale()
    ns.images, ns.tiny = 64, True
    assert hb.scale_of(ns) == hb.TINY.__class__(**{**asdict(hb.TINY), "images": 64})


def test_a_missed_spread_says_where_the_step_time_went():
    res = results()
    res["spread"]["units"] = {f"spread-{i}": whole(v, config="b64-w16", step_s_median=s, gpu_ms_median=g,
                                                   facts={"cpu.train_thread_pct": 50.0, "gpu.util_mean": u})
                              for i, v, s, g, u in ((1, 660.0, 0.092, 88.0, 37.0), (2, 553.0, 0.116, 90.0, 31.0))}
    text = rep.body(res)
    assert "Why the spread goal was missed" in text
    assert "median step 92 ms (GPU time by CUDA events 88 ms)" in text and "NVML GPU util 31%" in text
    assert "host probe before" not in text  # runs recorded before the probe existed: nothing made up
    for i, py in ((1, 10.0), (2, 12.0)):  # the host's Python loop got 20% slower with the run
        p = {"python_ms": py, "jpeg_decode_ms": 3.0, "memcpy_gbps": 7.0}
        res["spread"]["units"][f"spread-{i}"]["host_probe"] = {"before": p, "after": p}
    text = rep.body(res)
    assert "host probe before/after: Python loop 12.0/12.0 ms" in text
    res["spread"]["units"]["spread-1"]["host_probe"]["after"] = {"python_ms": 10.0, "jpeg_decode_ms": None,
                                                                 "memcpy_gbps": None}  # no OpenCV, no numpy
    assert "JPEG decode 3.00/- ms, memcpy 7.0/- GB/s" in rep.body(res)
    assert "training rate x0.84; the host probe's speed Python x0.83, JPEG decode x1.00" in text
    res["spread"]["units"]["spread-2"]["pyspy"] = {
        "samples": 1000, "on_cpu": 0.5, "gil": 0.45,
        "leaves": [{"where": "Tensor.item (torch/_tensor.py:9)", "share": 0.3, "on_cpu": 1.02, "gil": 0.0}],
        "other_threads": [{"thread": "pin", "on_cpu": 0.4, "gil": 0.35, "top": "x"}]}
    text = rep.body(res)
    assert ("run 2, py-spy on the training thread (1000 samples): on a CPU 50% and holding the GIL 45% of its wall "
            "time; where: Tensor.item (torch/_tensor.py:9) 30% (on a CPU 100%, GIL 0%); other threads holding the "
            "GIL: pin GIL 35%") in text
    res["spread"]["units"]["spread-2"]["steady_ips"] = 650.0  # within 5%: no explanation
    assert "Why the spread goal" not in rep.body(res)


def test_sweep_rows_carry_the_host_probe_and_its_range():
    res = results()
    assert "Host probe:" not in "\n".join(rep.sweep_table(res))  # no probe recorded: no sentence about one

    def p(ms):
        return {"python_ms": ms, "jpeg_decode_ms": 5.0, "memcpy_gbps": 6.0}

    res["sweep"]["units"]["b16-w8"]["host_probe"] = {"before": p(14.2), "after": p(26.5)}
    rows = rep.sweep_table(res)
    assert any(r.startswith("| b16-w8 |") and "| 14/26 | A |" in r for r in rows)
    assert any(r.startswith("| b128-w16-ro |") and "| - | A |" in r for r in rows)
    assert "14 to 26 ms over these runs" in rows[-1]


def test_trial_tables_show_the_host_probe_of_each_trial():
    fx = fix_rec(600.0, 1.0)
    assert "host probe" not in "\n".join(rep.trial_tables(fx))
    fx["trials"]["runs"] = [{"candidate": "baseline", "images_per_s": 250.0, "host_ms": 15.2},
                            {"candidate": "batch=64", "images_per_s": 600.0, "host_ms": 27.9}]
    fx["trials"]["host_spread"] = 0.59
    text = "\n".join(rep.trial_tables(fx))
    assert "| baseline | 250.0 (15 ms) |" in text and "| batch=64 | 600.0 (28 ms) |" in text
    assert "Python loop just before each trial (15 to 28 ms, spread 59%)" in text
    assert "Where an eager trial's time went" not in text  # no phases recorded
    ph = {"start_s": 7.0, "setup_s": 1.0, "first_step_s": 9.0, "steps_s": 12.0, "end_s": 1.5, "total_s": 30.5}
    fx["trials"]["runs"] = [{"candidate": "baseline", "status": "complete", "phases": ph},
                            {"candidate": "batch=64", "status": "complete", "phases": {**ph, "start_s": 8.0}},
                            {"candidate": "batch=64+compile=reduce-overhead", "status": "complete",
                             "phases": {**ph, "first_step_s": 110.0}}]
    text = "\n".join(rep.trial_tables(fx))  # the compiled trial is left out of the eager median
    assert ("Where an eager trial's time went (median of 2, from their events): Python start and imports until the "
            "trainer begins 7.5 s, setup 1.0 s, first step (first batch, CUDA and cuDNN start) 9.0 s") in text


def test_trial_tables_say_kept_only_for_what_was_applied():
    # recorded before df39bdc, a whole set that beat the baseline was "kept" though not applied whole
    fx = fix_rec(600.0, 1.0)
    fx["trials"]["verdicts"] = [
        {"candidate": "batch=64", "median": 600.0, "gain": 1.4, "kept": True, "why": "+140% beats the threshold"},
        {"candidate": "plan", "median": 640.0, "gain": 1.56, "kept": True,
         "why": "+156% beats the threshold; +6.7% over what was kept (batch=64), within the threshold: not applied "
                "whole"}]
    text = "\n".join(rep.trial_tables(fx))
    assert "| batch=64 |  | 600.0 | +140.0% | yes |" in text and "| plan |  | 640.0 | +156.0% | no |" in text
    # what was applied, by its arguments: fix names the applied run "plan" whatever part of the plan it holds
    fx["applied"] = {"status": "complete", "applied": "plan", "rolled_back": False, "args": {"batch": 64},
                     "other": {"PYTORCH_ALLOC_CONF": "expandable_segments:True"}}
    assert "Applied (complete): batch=64 PYTORCH_ALLOC_CONF=expandable_segments:True." in rep.trial_tables(fx)[-1]
    fx["applied"].update(rolled_back=True, rollback_reason="crashed")
    assert rep.trial_tables(fx)[-1] == "\nApplied (complete): nothing (rolled back: crashed)."


def test_a_second_configuration_run_twice_is_recorded_beside_the_default_pair():
    assert hb.spread_units("b64-w16") == ("spread-1", "spread-2")
    assert hb.spread_units("b64-w16-ro") == ("spread-b64-w16-ro-1", "spread-b64-w16-ro-2")
    res = results()
    res["spread"]["units"].update({n: whole(v, config="b64-w16-ro") for n, v in
                                   zip(hb.spread_units("b64-w16-ro"), (860.0, 850.0), strict=False)})
    f = rep.figures(res)
    assert [x["config"] for x in f["spreads"]] == ["b64-w16", "b64-w16-ro"] and f["spread"]["config"] == "b64-w16"
    assert abs(f["spreads"][1]["spread"] - 10 / 855) < 1e-9 and f["spreads"][1]["met"]
    text = rep.body(res)
    assert "| spread of b64-w16 run twice | <= 5% | 3.0%" in text
    assert "| spread of b64-w16-ro run twice | <= 5% | 1.2%" in text
    res["spread"]["units"]["spread-2"]["config"] = "b16-w8"  # an old pair of another configuration: not b64-w16's
    assert [x["config"] for x in rep.figures(res)["spreads"]] == ["b64-w16-ro"]


def test_a_run_whose_window_does_not_fit_in_an_epoch_gets_whole_epochs_without_warmup(tmp_path, monkeypatch):
    monkeypatch.setattr(hb, "machine", lambda: {"machine_id": "L", "host": "h", "gpu": None})
    ns = namespace(tmp_path)
    ns.scale = hb.Scale()  # 20,000 images
    r = hb.Runner(ns)
    # batch 128, 16 workers: 20 + 3 x 64 = 212 steps needed, 157 in an epoch
    assert r.long_enough({"batch": 128, "workers": 16}) == {"epochs": 2, "warmup_epochs": 0, "val": False}
    assert r.long_enough({"batch": 64, "workers": 16}) == {}  # 212 of 313
    assert r.long_enough({}) == {}  # the defaults: batch 16, 8 workers
    cmds = []

    class Started(Exception):
        pass

    def call(cmd, *a, **k):
        cmds.append(cmd)
        raise Started

    monkeypatch.setattr(r, "call", call)
    for unsafe in (False, True):
        with pytest.raises(Started):
            r.fix("fix-unsafe" if unsafe else "fix-safe", unsafe)
    assert "epochs=2" not in cmds[0] and "epochs=1" in cmds[0]
    assert {"epochs=2", "warmup_epochs=0", "val=False"} <= set(cmds[1]) and "epochs=1" not in cmds[1]
    seen = {}  # the sweep: only the batch-128 points get the extra epoch
    monkeypatch.setattr(r, "bounded", lambda run, a, **k: seen.setdefault(run.name, a))
    for u in r.units("sweep"):
        u.fn()
    assert seen["b128-w16-ro"]["epochs"] == 2 and seen["b128-w16-ro"]["compile"] == "reduce-overhead"
    assert "epochs" not in seen["b64-w16"] and "epochs" not in seen["b16-w8"]
    # at tiny scale fix-unsafe's reach maps down like the grid (batch 8, 2 workers over 480 images: one epoch is
    # enough), not 53 epochs of batch 128 over 480 images
    tiny = hb.Runner(namespace(tmp_path / "tiny"))
    assert tiny.scale.tiny and tiny.unsafe_reach() == {"batch": 8, "workers": 2}
    assert tiny.long_enough(tiny.unsafe_reach()) == {}


def test_the_trials_ratio_is_read_off_the_candidate_holding_exactly_what_was_kept():
    fx = {"plan": [{"key": k, "after": v} for k, v in (("batch", 64), ("compile", "reduce-overhead"),
                                                          ("deterministic", False), ("workers", 14))],
          "kept": {"batch": 64, "workers": 14, "compile": "reduce-overhead"},
          "trials": {"verdicts": [{"candidate": "baseline", "median": 250.0},
                                  {"candidate": "batch=64", "median": 600.0},
                                  {"candidate": "batch=64+workers=14", "median": 880.0},
                                  {"candidate": "batch=64+workers=14+compile=reduce-overhead", "median": 1000.0},
                                  {"candidate": "plan", "median": 1050.0}]}}
    assert rep.trial_ratio(fx) == ("batch=64+workers=14+compile=reduce-overhead", pytest.approx(4.0))
    fx["kept"]["deterministic"] = False  # everything kept: the whole plan's trial
    assert rep.trial_ratio(fx) == ("plan", pytest.approx(4.2))
    fx["kept"] = {"workers": 14}  # no candidate holds workers alone
    assert rep.trial_ratio(fx) is None
    fx["kept"] = {"batch": 32}  # the values count, not only the keys (fix-unsafe: batch=128 vs its fallback 64)
    assert rep.trial_ratio(fx) is None


def test_the_best_safe_configuration_keeps_the_effective_batch_and_the_precision():
    assert rep._safe({"batch": 64, "workers": 16, "compile": "reduce-overhead"}) and rep._safe({"batch": 32})
    assert not rep._safe({"batch": 128}) and not rep._safe({"batch": 48})  # 48 x round(64 / 48) = 48
    assert not rep._safe({"batch": 64, "amp": "bf16"}) and not rep._safe({"amp": False})
    assert rep._safe({"batch": 64, "amp": "fp16"})


def test_the_recorded_trials_are_replayed_under_the_current_rules():
    # fix-safe on the H200 (2026-12-03, --max-reps 4): fix applied batch + workers after 18 trials; replayed in the
    # order they ran under today's rules, the whole plan beats the kept batch=64 after the first two rounds
    import json

    h = json.loads((hb.ROOT / "fixtures/trials/h200-fix-safe-2026-12-03d.json").read_text())
    fx = {"plan": h["plan"], "trials": h["trials"], "kept": h["kept"]}
    again = rep.rejudge(fx)
    assert again["kept"] == {"batch": 64, "compile": "reduce-overhead", "deterministic": False, "workers": 14}
    assert again["trials"] == 12 and again["recorded"] == 18 and again["missing"] is None
    assert "applied whole: +45.6% over batch=64" in again["verdicts"]["plan"]
    # the candidates rebuilt from their names are judged against what they stand on, as they ran
    assert again["verdicts"]["batch=64+workers=14"].startswith("+18.6% is within the noise threshold")
    fx2 = {**fx, "applied_run": {"facts": {}}, "machine": {"machine_id": "h200-2026-12-03d"}}
    lines = rep.explain({"fix-safe": {"units": {"fix": fx2}}}, "fix-safe", {})
    assert any(x.startswith("trials replayed under the current rules: fix would keep batch=64 "
                            "compile=reduce-overhead deterministic=False workers=14 after 12 of the 18 recorded "
                            "trials (applied whole: +45.6%") for x in lines)
    # where today's rules ask for a trial that was not recorded, the replay says so and judges what there is
    cut = {**fx, "trials": {**h["trials"], "runs": [r for r in h["trials"]["runs"]
                                                    if (r["candidate"], r["rep"]) != ("batch=64", 1)]}}
    partial = rep.rejudge(cut)
    assert partial["missing"] == "batch=64 (repeat 2)" and partial["trials"] == 10
    # a plan with a change to training is not replayed: its loss parity needs curves the results do not keep
    unsafe = {**fx, "plan": [{**c, "safety": "unsafe"} if c["key"] == "batch" else c for c in h["plan"]]}
    assert rep.rejudge(unsafe) is None


def test_phases_say_where_a_runs_time_went(tmp_path):
    ev = [{"type": "run_start", "t": 100.0}, {"type": "train_begin", "t": 107.5, "train_index": 0},
          {"type": "epoch_start", "t": 109.0, "train_index": 0},
          {"type": "step", "t": 118.0, "train_index": 0}, {"type": "step", "t": 118.1, "train_index": 0},
          {"type": "step", "t": 130.0, "train_index": 0}, {"type": "run_end", "t": 131.5}]
    (tmp_path / "events.jsonl").write_text("\n".join(json.dumps(e) for e in ev) + "\n{\"type\": \"st")
    assert hb.phases(tmp_path) == pytest.approx({"start_s": 7.5, "setup_s": 1.5, "first_step_s": 9.0,
                                                 "steps_s": 12.0, "end_s": 1.5, "total_s": 31.5})
    (tmp_path / "events.jsonl").write_text(json.dumps(ev[0]) + "\n")  # cut off before its first step
    assert hb.phases(tmp_path) is None and hb.phases(tmp_path / "gone") is None


def test_compile_cost_is_read_off_the_trials_that_compiled():
    def run(cand, first, setup=1.2):
        return {"candidate": cand, "status": "complete", "phases": {"setup_s": setup, "first_step_s": first}}
    fx = {"profile": {"settings": {"batch": 16}},
          "plan": [{"key": "batch", "after": 64}, {"key": "compile", "after": "reduce-overhead"},
                   {"key": "deterministic", "after": False}],
          "trials": {"runs": [run("baseline", 5.0), run("batch=64", 9.0), run("batch=64+compile=reduce-overhead",
                                                                             109.0, 4.0),
                              run("plan", 110.0, 3.8), run("plan", 16.0, 3.8), run("batch=64", 8.6),
                              run("batch=64+compile=reduce-overhead", 15.0, 4.0)]}}
    tc = rep.trial_compile(fx)
    # eager at batch 64: 10.2 and 9.8 (the baseline ran batch 16: not a reference); the plan compiled too
    assert tc["batch"] == "64" and tc["mode"] == "reduce-overhead" and tc["eager_s"] == pytest.approx(10.0)
    assert tc["first"] == pytest.approx([103.0, 103.8]) and tc["again"] == pytest.approx((9.8 + 9.0) / 2)
    assert tc["n_again"] == 2 and tc["n_eager"] == 2
    fx["plan"] = fx["plan"][:1]
    fx["trials"]["runs"] = [r for r in fx["trials"]["runs"] if "compile" not in r["candidate"]
                            and r["candidate"] != "plan"]
    assert rep.trial_compile(fx) is None  # nothing compiled


def test_the_workers_part_alternates_its_counts_and_the_report_tabulates_them():
    names = [n for n, _ in hb.workers_units()]
    assert names == ["b64-ro-w8-1", "b64-ro-w12-1", "b64-ro-w16-1", "b64-ro-w16-2", "b64-ro-w12-2", "b64-ro-w8-2"]
    assert dict(hb.workers_units())["b64-ro-w12-1"] == {"batch": 64, "workers": 12, "compile": "reduce-overhead"}
    res = results()
    assert "workers: b64-ro-w8-1" in "\n".join(rep.missing(res))
    units = {n: whole(ips, workers=w, config=n, compute_s=[c - 0.01, c, c + 0.02], wait_share=ws)
             for n, w, ips, c, ws in (("b64-ro-w8-1", 8, 540.0, 0.060, 0.30),
                                      ("b64-ro-w12-1", 12, 780.0, 0.066, 0.05),
                                      ("b64-ro-w16-1", 16, 880.0, 0.072, 0.01),
                                      ("b64-ro-w16-2", 16, 900.0, 0.070, 0.01),
                                      ("b64-ro-w12-2", 12, 760.0, 0.064, 0.06), ("b64-ro-w8-2", 8, 520.0, 0.058, 0.31))}
    for u in units.values():
        u["workers"] = u["settings"]["workers"]
    res["workers"] = {"part": "workers", "scale": res["sweep"]["scale"], "units": units}
    rows = rep.workers_table(res)
    assert rows[2] == ("| 8 | 540.0, 520.0 | 30%, 31% | 60 (50-80) ms | 58 (48-78) ms | A |")
    assert rows[4].startswith("| 16 | 880.0, 900.0 | 1%, 1% | 72 (62-92) ms")
    assert "workers: " not in "\n".join(rep.missing(res))
    assert "### Loader workers and the host's work per step" in rep.body(res)
