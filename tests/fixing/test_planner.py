"""The planner honours the machine's measured limits and the safe/unsafe line."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

from yolodoctor.findings import Finding, Fix, Severity
from yolodoctor.fixing.planner import plan

ROOT = Path(__file__).resolve().parents[2]
FACTS = {"run.device": "cuda", "run.batch": 16.0, "settings.nbs": 64.0, "gpu.mem_fraction_peak": 0.05,
         "cpu.count": 16.0, "settings.imgsz": 640.0, "mem.shm_free_min": 64e9, "gpu.cc_major": 9.0,
         "run.epochs": 100.0, "run.epoch_s": 40.0}
SETTINGS = {"batch": 16, "workers_requested": 8, "amp_requested": True, "compile_requested": False, "cache": None,
            "deterministic": True}


def finding(rid, gain=None, one_off=None, safety="safe", changes=False, **args):
    return Finding(rid, "x", "config", Severity.warning, "m",
                   fix=Fix(args=args, safety=safety, changes_training=changes, seconds_saved_per_epoch=gain,
                           one_off_seconds=one_off))


def keys(p):
    return p.args, [d["reason"] for d in p.dropped]


def test_safe_changes_pass_and_gain_decides_conflicts():
    p = plan([finding("LA201", 30.0, batch=64), finding("MM202", None, batch=48), finding("DL201", 10.0, workers=12)],
             FACTS, SETTINGS)
    assert p.args == {"batch": 64, "workers": 12}
    assert p.changes[0].key == "batch" and p.changes[0].before == 16
    assert any("MM202" in d["reason"] for d in p.dropped)
    assert p.run_saving() == {"best_single_per_epoch": 30.0, "one_off": 0, "planned_run_upper_bound": 3000.0}


def test_workers_limited_by_cores_and_shm():
    assert "exceed" in keys(plan([finding("DL201", 5.0, workers=16)], FACTS, SETTINGS))[1][0]
    small_shm = dict(FACTS, **{"mem.shm_free_min": 0.5e9})  # 12 x 4 x 16 x 640x640x3 = 0.94 GB
    assert "shm" in keys(plan([finding("DL201", 5.0, workers=12)], small_shm, SETTINGS))[1][0]


def test_batch_limited_by_nbs_and_memory():
    args, why = keys(plan([finding("LA201", 5.0, batch=128)], FACTS, SETTINGS))
    assert args == {} and "above nbs" in why[0]
    args, _ = keys(plan([finding("LA201", 5.0, batch=128)], FACTS, SETTINGS, allow_unsafe=True))
    assert args == {"batch": 128}
    full = dict(FACTS, **{"gpu.mem_fraction_peak": 0.3})  # 0.3 x 64/16 = 120% of the GPU
    assert "above 80%" in keys(plan([finding("LA201", 5.0, batch=64)], full, SETTINGS))[1][0]


def test_cache_needs_measured_ram_and_bf16_needs_ampere():
    assert "not measured" in keys(plan([finding("DL203", 5.0, cache="ram")], FACTS, SETTINGS))[1][0]
    assert keys(plan([finding("DL203", 5.0, cache="ram")], dict(FACTS, **{"check.cache_ram_fits": True}),
                     SETTINGS))[0] == {"cache": "ram"}
    assert "does not fit" in keys(plan([finding("DL203", 5.0, cache="ram")],
                                       dict(FACTS, **{"check.cache_ram_fits": False}), SETTINGS))[1][0]
    bf16 = finding("PR202", None, safety="unsafe", changes=True, amp="bf16")
    assert "only with --allow-unsafe" in keys(plan([bf16], FACTS, SETTINGS))[1][0]
    assert "8.0" in keys(plan([bf16], dict(FACTS, **{"gpu.cc_major": 7.0}), SETTINGS, allow_unsafe=True))[1][0]


def test_compile_must_repay_its_one_off_cost():
    short = dict(FACTS, **{"run.epochs": 2.0})
    why = keys(plan([finding("LA202", 10.0, 130.0, compile="reduce-overhead")], short, SETTINGS))[1][0]
    assert "does not repay" in why
    b64 = dict(FACTS, **{"run.batch": 64.0})
    assert keys(plan([finding("LA202", 10.0, 130.0, compile="reduce-overhead")], b64, dict(SETTINGS, batch=64)))[0] \
        == {"compile": "reduce-overhead"}
    cpu = dict(FACTS, **{"run.device": "cpu"})
    assert "only on CUDA" in keys(plan([finding("LA202", 10.0, 130.0, compile=True)], cpu, SETTINGS))[1][0]
    # no estimate of its gain, but a training shorter than its compilation cannot repay it: on an H100, a 20-epoch
    # training of 4.9 s epochs and a 1-epoch one of 51 s both had compile=reduce-overhead planned at 130 s
    tiny = dict(FACTS, **{"run.epochs": 20.0, "run.epoch_s": 4.9, "run.batch": 64.0})
    why = keys(plan([finding("LA202", None, 130.0, compile="reduce-overhead")], tiny, dict(SETTINGS, batch=64)))[1]
    assert why and "shorter than the 130 s compilation costs" in why[0]
    long = dict(tiny, **{"run.epochs": 30.0})  # 147 s of epochs: it could
    assert keys(plan([finding("LA202", None, 130.0, compile="reduce-overhead")], long, dict(SETTINGS, batch=64)))[0] \
        == {"compile": "reduce-overhead"}


def test_the_saving_bound_charges_a_one_off_cost_only_to_the_change_that_pays_it():
    both = plan([finding("LA202", None, 130.0, compile="reduce-overhead"), finding("LA201", 3.69, batch=64)],
                dict(FACTS, **{"run.epochs": 20.0}), SETTINGS)
    assert "compile" in both.args  # 20 x 40 s epochs repay compilation
    assert both.run_saving() == {"best_single_per_epoch": 3.69, "one_off": 0, "planned_run_upper_bound": 73.8}
    cache = plan([finding("DL204", 10.0, 60.0, cache="ram")], dict(FACTS, **{"check.cache_ram_fits": True,
                                                                             "run.epochs": 10.0}), SETTINGS)
    assert cache.run_saving()["planned_run_upper_bound"] == 10.0 * 10 - 60.0


def test_cuda_graphs_only_without_gradient_accumulation():
    # batch 16 < nbs 64: Ultralytics accumulates 4 micro-batches, and CUDA graphs crash with accumulation
    alone = plan([finding("LA202", 10.0, 130.0, compile="reduce-overhead")], FACTS, SETTINGS)
    assert alone.args == {"compile": True} and "169545" in alone.changes[0].note
    assert alone.changes[0].requires == []
    # the plan's own batch change ends the accumulation: reduce-overhead stays, and needs that change
    both = plan([finding("LA202", 10.0, 130.0, compile="reduce-overhead"), finding("LA201", 30.0, batch=64)],
                FACTS, SETTINGS)
    assert both.args == {"batch": 64, "compile": "reduce-overhead"}
    ro = next(c for c in both.changes if c.key == "compile")
    assert ro.requires == ["batch"]
    # a batch change that still accumulates (32 -> accumulate 2) does not make CUDA graphs safe
    half = plan([finding("LA202", 10.0, 130.0, compile="reduce-overhead"), finding("LA201", 30.0, batch=32)],
                FACTS, SETTINGS)
    assert half.args == {"batch": 32, "compile": True}
    # round(64 / 48) == 1: Ultralytics does not accumulate at batch 48 (so its effective batch is 48, not 64:
    # that changes training, and is planned only with --allow-unsafe)
    finds = [finding("LA202", 10.0, 130.0, compile="reduce-overhead"), finding("LA201", 30.0, batch=48)]
    b48 = plan(finds, FACTS, SETTINGS, allow_unsafe=True)
    assert b48.args == {"batch": 48, "compile": "reduce-overhead"} and b48.changes[0].changes_training
    assert plan(finds, FACTS, SETTINGS).args == {"compile": True}
    # a batch chosen at run time (autobatch) cannot rule accumulation out
    auto = plan([finding("LA202", 10.0, 130.0, compile="reduce-overhead")], dict(FACTS, **{"run.batch": None}),
                dict(SETTINGS, batch=-1))
    assert auto.args == {"compile": True} and "autobatch" in auto.changes[0].note
    # compiled already (without CUDA graphs) and accumulating: nothing to change, and the plan says why
    compiled = plan([finding("LA202", 10.0, 130.0, compile="reduce-overhead")], FACTS,
                    dict(SETTINGS, compile_requested=True))
    assert compiled.args == {} and "169545" in compiled.dropped[-1]["reason"]


def test_no_op_change_is_dropped():
    assert "already set" in keys(plan([finding("CF201", None, deterministic=True)], FACTS, SETTINGS))[1][0]


def test_fix_command_on_a_recorded_profile():
    p = subprocess.run([sys.executable, "-m", "yolodoctor", "fix", str(ROOT / "fixtures/profiles/h200-workers0"),
                        "--json"], capture_output=True, text=True, env={**os.environ, "YOLO_OFFLINE": "1"})
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["command"] == "fix" and doc["trials"] == []
    f = doc["facts"]  # DL201's rule: enough workers for 1.3x what the GPU side consumes, at the rate per worker
    want = min(f["cpu.count"] - 1, max(1, math.ceil(1.3 * (f["run.batch"] / f["run.compute_s"])
                                                   / f["loader.capacity_images_per_s"])))
    assert doc["plan"]["args"]["workers"] == int(want) and doc["plan"]["changes"][0]["reason"].startswith("DL201")


def test_changes_that_alter_the_optimisation_are_marked_unsafe_whatever_the_rule_says():
    from yolodoctor.fixing.planner import Change, changes_training

    # a rule that (wrongly) calls batch 128 safe: above nbs the planner marks it unsafe, and it needs --allow-unsafe
    p = plan([finding("LA201", 30.0, batch=128)], FACTS, SETTINGS, allow_unsafe=True)
    assert p.changes[0].safety == "unsafe" and p.changes[0].changes_training
    assert not plan([finding("LA201", 30.0, batch=64)], FACTS, SETTINGS).changes[0].changes_training
    assert changes_training(Change("args", "amp", True, "bf16", "r"), 64)
    assert not changes_training(Change("args", "amp", True, "fp16", "r"), 64)
    assert changes_training(Change("args", "amp", "fp16", False, "r"), 64)
    assert changes_training(Change("args", "nbs", 64, 128, "r"), 64)
    assert not changes_training(Change("args", "workers", 8, 12, "r"), 64)


def test_workers_are_planned_when_the_plan_would_outrun_the_loader():
    # the H200 defaults: 8 workers deliver 520 images/s alone; batch 64 projects 8000 / (24 - 12) = 667 images/s
    facts = dict(FACTS, **{"loader.capacity_images_per_s": 520.0, "settings.workers": 8.0, "run.epoch_s": 24.0,
                           "run.images_per_epoch": 8000.0, "cpu.usable": 16.0})
    p = plan([finding("LA201", 12.0, batch=64)], facts, SETTINGS)
    w = next(c for c in p.changes if c.key == "workers")
    assert w.after == 12 and w.before == 8 and w.requires == ["batch"]  # ceil(1.1 x 667 / 65)
    assert "667 images/s" in w.note
    # never more than the cores less 2
    fast = dict(facts, **{"run.epoch_s": 14.0})  # projects 4000 images/s
    assert next(c for c in plan([finding("LA201", 12.0, batch=64)], fast, SETTINGS).changes
                if c.key == "workers").after == 14
    # the loader keeps up: nothing to add
    assert "workers" not in plan([finding("LA201", 2.0, batch=64)], facts, SETTINGS).args  # projects 364
    # /dev/shm too small for more workers at batch 64 and 640: said, not planned
    tight = dict(facts, **{"mem.shm_free_min": 8 * 4 * 64 * 640 * 640 * 3 + 1})
    p2 = plan([finding("LA201", 12.0, batch=64)], tight, SETTINGS)
    assert "workers" not in p2.args and "no more workers fit" in p2.dropped[-1]["reason"]


def test_the_best_permitted_proposal_wins_a_key():
    # LA203 (batch 128, unsafe) estimates more gain than LA201 (batch 64, safe): without --allow-unsafe the plan
    # falls back to LA201's proposal instead of losing the key
    props = [finding("LA201", 12.0, batch=64), finding("LA203", 18.0, None, "unsafe", True, batch=128)]
    safe = plan(props, FACTS, SETTINGS)
    assert safe.args == {"batch": 64} and any("LA203" in d["reason"] and "above nbs" in d["reason"]
                                               for d in safe.dropped)
    unsafe = plan(props, FACTS, SETTINGS, allow_unsafe=True)
    assert unsafe.args == {"batch": 128} and unsafe.changes[0].changes_training
    assert any("LA201" in d["reason"] and "more gain" in d["reason"] for d in unsafe.dropped)


def test_effective_batch_decides_whether_a_batch_change_changes_training():
    from yolodoctor.fixing.planner import Change, changes_training

    def b(before, after):
        return changes_training(Change("args", "batch", before, after, "r"), 64)

    assert not b(16, 64) and not b(16, 32) and not b(8, 16)  # accumulate keeps 64 images per optimizer step
    assert b(16, 128) and b(128, 64) and b(16, 48) and b(16, 40)  # 128; 128 -> 64; 48 x 1; 40 x 2 = 80
    assert not b(16, -1) and not b(16, 0.9)  # autobatch: decided at run time


def test_an_unsafe_winner_keeps_its_safe_alternative_for_the_trials():
    props = [finding("LA201", 12.0, batch=64), finding("LA203", 18.0, None, "unsafe", True, batch=128)]
    p = plan(props, FACTS, SETTINGS, allow_unsafe=True)
    assert p.args == {"batch": 128} and [(c.key, c.after) for c in p.fallbacks] == [("batch", 64)]
    assert plan(props, FACTS, SETTINGS).fallbacks == []  # without --allow-unsafe the safe one is the plan
    # the best proposal is already what runs: the key stops there, no lower-gain proposal slips in
    same = plan([finding("LA201", 12.0, batch=16), finding("MM202", 5.0, batch=32)], FACTS, SETTINGS)
    assert "batch" not in same.args and "already set" in same.dropped[0]["reason"]


def fix_cli(*argv):
    p = subprocess.run([sys.executable, "-m", "yolodoctor", "fix", *map(str, argv)], capture_output=True, text=True,
                       env={**os.environ, "YOLO_OFFLINE": "1"}, timeout=120)
    return p.returncode, p.stderr


def test_unsafe_tries_and_unverified_unsafe_plans_are_refused_before_any_training():
    b128 = ROOT / "fixtures/profiles/h200-b128w16-cpu-saturated"  # batch 128: effective batch 128
    code, err = fix_cli(b128, "--try", "batch=32")  # 32 x 2 = 64 images per optimizer step: changes training
    assert code == 2 and "--allow-unsafe" in err and "Traceback" not in err
    # allowed, but the plan's compile='reduce-overhead' would then accumulate 2 micro-batches: CUDA graphs crash
    code, err = fix_cli(b128, "--try", "batch=32", "--allow-unsafe")
    assert code == 2 and "169545" in err and "batch=64" in err
    # an unsafe plan (batch 128, bf16) is applied only after a loss-parity trial: --verify is required
    code, err = fix_cli(ROOT / "fixtures/profiles/h200-defaults", "--allow-unsafe", "--apply", "--yes")
    assert code == 2 and "--verify" in err and "batch=128" in err


def h200_facts():
    # the H200 defaults' profile of fix-safe (2026-12-03: loader alone 537 images/s at 8 workers)
    return dict(FACTS, **{"loader.capacity_images_per_s": 537.0, "settings.workers": 8.0, "run.epoch_s": 76.6,
                          "run.images_per_epoch": 20000.0, "cpu.usable": 16.0})


def test_gpu_side_changes_are_trialled_with_the_loader_ceiling_lifted():
    # fix-safe on the H200: batch 64 at 8 workers met the loader's 537 images/s, so batch=64+compile was trialled
    # where compile could not show (532 vs 603 images/s)
    from yolodoctor.fixing.candidates import candidates

    finds = [finding("LA201", 57.5, batch=64), finding("LA202", 20.0, 130.0, compile="reduce-overhead"),
             finding("CF201", 5.0, deterministic=False), finding("IO201", 3.0, cache="ram")]
    p = plan(finds, dict(h200_facts(), **{"check.cache_ram_fits": True}), SETTINGS)
    by = {c.key: c for c in p.changes}
    # the planner's own needs: CUDA graphs need the batch that ends accumulation, compile needs determinism off
    assert by["workers"].requires == ["batch"] and by["compile"].requires == ["batch", "deterministic"]
    assert "inductor neither splits reductions nor autotunes them" in by["compile"].note
    cands = {c.name: c for c in candidates(p)}
    assert set(cands) == {"baseline", "batch=64", "batch=64+workers=14+deterministic=False+compile=reduce-overhead",
                          "batch=64+workers=14+deterministic=False", "cache=ram", "batch=64+workers=14", "plan"}
    ro = cands["batch=64+workers=14+deterministic=False+compile=reduce-overhead"]
    assert ro.args == {"batch": 64, "workers": 14, "deterministic": False, "compile": "reduce-overhead"}
    assert ro.against == "batch=64+workers=14+deterministic=False"
    assert cands["batch=64+workers=14"].against == "batch=64"
    assert cands["batch=64+workers=14+deterministic=False"].against == "batch=64+workers=14"
    assert cands["cache=ram"].against == "baseline"  # the loader side stays alone
    # no workers change (the loader keeps up): nothing is stacked
    calm = plan(finds[:3], dict(h200_facts(), **{"loader.capacity_images_per_s": 5000.0}), SETTINGS)
    assert "workers" not in calm.args
    assert {c.name for c in candidates(calm)} == {"baseline", "batch=64", "deterministic=False",
                                                  "batch=64+deterministic=False+compile=reduce-overhead",
                                                  "batch=64+deterministic=False"}  # the last holds the whole plan
    # deterministic left as it is: compile needs only the batch
    alone = plan(finds[:2], dict(h200_facts(), **{"loader.capacity_images_per_s": 5000.0}), SETTINGS)
    assert {c.key: c for c in alone.changes}["compile"].requires == ["batch"]


def test_an_unsafe_driver_gets_the_workers_too_and_the_safe_changes_stack_on_its_fallback():
    # --allow-unsafe: batch 128 (above nbs: loss parity) drives the workers change; stacked on it, compile would
    # need loss parity and fall with batch 128, so the stacking is done on the safe fallback, batch 64
    from yolodoctor.fixing.candidates import candidates

    finds = [finding("LA203", 60.0, safety="unsafe", batch=128), finding("LA201", 57.5, batch=64),
             finding("LA202", 20.0, 130.0, compile="reduce-overhead"), finding("CF201", 5.0, deterministic=False),
             finding("PR202", 10.0, safety="unsafe", changes=True, amp="bf16")]
    p = plan(finds, h200_facts(), SETTINGS, allow_unsafe=True)
    assert p.args["batch"] == 128 and [(c.key, c.after) for c in p.fallbacks] == [("batch", 64)]
    cands = {c.name: c for c in candidates(p)}
    assert set(cands) == {"baseline", "batch=128", "batch=128+workers=14", "batch=64", "batch=64+workers=14",
                          "batch=64+workers=14+deterministic=False", "batch=64+workers=14+amp=bf16", "plan",
                          # compile on what it requires, which is also the plan's safe part: one candidate, not two
                          "batch=64+workers=14+deterministic=False+compile=reduce-overhead"}
    assert cands["batch=128+workers=14"].against == "batch=128" and cands["batch=64+workers=14"].against == "batch=64"
    ro = cands["batch=64+workers=14+deterministic=False+compile=reduce-overhead"]
    assert ro.against == "batch=64+workers=14+deterministic=False" and not ro.whole
    assert not any(x.changes_training for x in ro.changes)
    assert any(x.changes_training for x in cands["batch=128+workers=14"].changes)


def test_a_tried_change_is_stacked_on_the_workers_change_too():
    from yolodoctor.fixing.candidates import candidates
    from yolodoctor.fixing.planner import Change

    p = plan([finding("LA201", 57.5, batch=64)], h200_facts(), SETTINGS)
    p.changes.append(Change("args", "channels_last", False, True, "--try (yours)"))
    cands = {c.name: c for c in candidates(p)}
    assert cands["batch=64+workers=14+channels_last=True"].against == "batch=64+workers=14"


def test_no_stacking_where_the_workers_rest_on_an_unsafe_change_without_a_usable_fallback():
    from yolodoctor.fixing.candidates import candidates

    # batch 128 alone (no batch-64 proposal): compile and deterministic stacked on it would share its loss parity
    finds = [finding("LA203", 60.0, safety="unsafe", batch=128), finding("LA202", 20.0, 130.0,
                                                                          compile="reduce-overhead"),
             finding("CF201", 5.0, deterministic=False)]
    p = plan(finds, h200_facts(), SETTINGS, allow_unsafe=True)
    assert p.fallbacks == [] and "workers" in p.args
    assert {c.name for c in candidates(p)} == {"baseline", "batch=128", "batch=128+deterministic=False",
                                               "batch=128+deterministic=False+compile=reduce-overhead",
                                               "deterministic=False", "batch=128+workers=14", "plan"}
    # a fallback that accumulates gradients (batch 32 at nbs 64) cannot carry CUDA graphs: not stacked on either
    finds32 = [*finds, finding("MM202", 1.0, batch=32)]
    p32 = plan(finds32, h200_facts(), SETTINGS, allow_unsafe=True)
    assert [(c.key, c.after) for c in p32.fallbacks] == [("batch", 32)]
    names = {c.name for c in candidates(p32)}
    assert "batch=32+workers=14+compile=reduce-overhead" not in names and "batch=32" in names
    assert "batch=128+deterministic=False+compile=reduce-overhead" in names


def test_the_whole_plan_is_trialled_where_no_candidate_holds_exactly_it():
    from yolodoctor.fixing.candidates import candidates

    finds = [finding("LA203", 60.0, safety="unsafe", batch=128), finding("LA201", 57.5, batch=64),
             finding("LA202", 20.0, 130.0, compile="reduce-overhead")]
    p = plan(finds, h200_facts(), SETTINGS, allow_unsafe=True)
    cands = {c.name: c for c in candidates(p)}
    # batch=64+workers=14+compile holds as many changes as the plan, but not the plan's batch 128
    assert "batch=64+workers=14+compile=reduce-overhead" in cands and "plan" in cands
    assert {(x.key, x.after) for x in cands["plan"].changes} == {("batch", 128), ("compile", "reduce-overhead"),
                                                                 ("workers", 14)}


def test_every_reference_is_a_candidate_when_compile_drives_the_workers():
    from yolodoctor.fixing.candidates import candidates
    from yolodoctor.fixing.planner import Change, Plan

    ro = Change("args", "compile", False, "reduce-overhead", "LA202 t", requires=["batch"])
    big = Change("args", "batch", 16, 128, "LA203 t", "unsafe", changes_training=True)
    w = Change("args", "workers", 8, 14, "planner loader-capacity", requires=["compile"])
    det = Change("args", "deterministic", True, False, "CF201 t")
    p = Plan(changes=[ro, big, det, w], fallbacks=[Change("args", "batch", 16, 64, "LA201 t")])
    cands = {c.name: c for c in candidates(p)}
    top = "batch=64+compile=reduce-overhead+workers=14+deterministic=False"
    assert cands[top].against == "batch=64+compile=reduce-overhead+workers=14"
    assert cands["batch=64+compile=reduce-overhead+workers=14"].against == "batch=64+compile=reduce-overhead"
    assert cands["batch=64+compile=reduce-overhead"].against == "batch=64"
    assert cands["batch=64"].against == "baseline"


# png-decode on an H100 host with 16 cores (2026-12-07): 1,500 1080p PNGs at batch 32, 8 workers, a 13.2 s epoch
# waiting 64% for data; the cache's fill (1,800 train and val images) estimated at 16 s
DECODE = dict(FACTS, **{"check.cache_ram_fits": True, "run.epoch_s": 13.2, "run.data_wait_share": 0.64,
                        "run.batch": 32.0, "run.epochs": 3.0})
DECODE_SETTINGS = dict(SETTINGS, batch=32)


def test_the_cache_must_repay_its_fill_beyond_what_more_workers_save():
    findings = [finding("DL204", 8.44, 16.0, cache="ram"), finding("DL201", 8.44, workers=15)]
    short = plan(findings, DECODE, DECODE_SETTINGS)
    # 15 workers for 8 leave max(4.75, 13.2 x 8/15 = 7.04) - 4.75 = 2.3 s an epoch to the cache: 6.9 s over 3 epochs
    assert short.args == {"workers": 15}
    why = next(d["reason"] for d in short.dropped if d["key"] == "cache")
    assert "2.3 s an epoch x 3 epochs does not repay the 16 s" in why and "beyond workers=15" in why
    long = plan(findings, dict(DECODE, **{"run.epochs": 20.0}), DECODE_SETTINGS)  # 46 s over 20 epochs: it repays
    cache = next(c for c in long.changes if c.key == "cache")
    assert long.args == {"cache": "ram", "workers": 15} and cache.seconds_saved_per_epoch == 2.29
    assert "what it adds to workers=15" in cache.note and long.changes[0].key == "workers"  # the larger gain first


def test_the_cache_is_left_out_where_more_workers_leave_it_no_wait():
    # 8 -> 15 workers at the measured rate per worker feed 4.75 s of GPU side in 13.2 x 8/15 = 7.0 s; a training whose
    # wait is 40% (GPU side 7.9 s) is fed by them: nothing is left for the cache, whatever its fill and the epochs
    fed = dict(DECODE, **{"run.data_wait_share": 0.4, "run.epochs": 100.0})
    for one_off in (16.0, None):
        p = plan([finding("DL204", 5.3, one_off, cache="ram"), finding("DL201", 5.3, workers=15)], fed,
                 DECODE_SETTINGS)
        assert p.args == {"workers": 15}
        assert "workers=15 leave it no data wait" in next(d["reason"] for d in p.dropped if d["key"] == "cache")


def test_the_cache_alone_is_judged_by_its_own_gain_and_fill():
    alone = [finding("DL204", 8.44, 16.0, cache="ram")]  # no workers change: the whole wait is the cache's
    assert plan(alone, DECODE, DECODE_SETTINGS).args == {"cache": "ram"}  # 25 s over 3 epochs repays 16 s
    one = plan(alone, dict(DECODE, **{"run.epochs": 1.0}), DECODE_SETTINGS)
    assert one.args == {} and "8.4 s an epoch x 1 epochs does not repay the 16 s" in one.dropped[-1]["reason"]
    # no estimate of the fill (check did not time the decode): nothing to charge
    assert plan([finding("DL204", 8.44, None, cache="ram")], dict(DECODE, **{"run.epochs": 1.0}),
                DECODE_SETTINGS).args == {"cache": "ram"}


def test_a_cache_left_out_leaves_the_loader_workers_to_what_stays_in_the_plan():
    # one epoch cannot repay the fill; batch=64 is left as the plan's largest gain, projecting 1500 / (13.2 - 5.0) =
    # 183 images/s against the 120 that 8 workers deliver: the planner adds workers for the batch, not for the cache
    fed = dict(DECODE, **{"run.epochs": 1.0, "settings.workers": 8.0, "loader.capacity_images_per_s": 120.0,
                          "run.images_per_epoch": 1500.0})
    p = plan([finding("DL204", 8.44, 16.0, cache="ram"), finding("LA201", 5.0, batch=64)], fed, DECODE_SETTINGS)
    workers = next(c for c in p.changes if c.key == "workers")
    assert p.args == {"batch": 64, "workers": 14} and workers.requires == ["batch"]
    assert any(d["key"] == "cache" and "does not repay" in d["reason"] for d in p.dropped)
