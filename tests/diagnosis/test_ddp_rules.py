"""The rules only multi-GPU (DDP) trainings have, on the recorded two-rank runs and on their facts."""

from pathlib import Path

from yolodoctor.diagnosis.diagnose import diagnose
from yolodoctor.diagnosis.engine import evaluate
from yolodoctor.diagnosis.facts import _rank_facts, from_profile
from yolodoctor.diagnosis.rules import load_rules
from yolodoctor.record import profile as record

PROFILES = Path(__file__).resolve().parents[2] / "fixtures" / "profiles"


def ids(run: Path) -> list[str]:
    return [f.id for f in diagnose(run).findings]


def test_the_straggler_is_named_on_the_recorded_run_and_not_on_the_balanced_one():
    # two ranks over gloo on the CPU (bench/cpu_ddp_fixtures.sh): rank 1 of the straggler run ran no loader worker
    # and decoded its images between its steps, rank 0 spent that time inside the all-reduce
    straggler = diagnose(PROFILES / "cpu-ddp2-straggler").findings
    dd = next(f for f in straggler if f.id == "DD201")
    assert dd.message.startswith("Rank 1 waits 37 ms per step for its data, the other ranks 5 ms")
    assert "holding all 2 ranks back" in dd.message
    assert "DD201" not in ids(PROFILES / "cpu-ddp2-balanced")


def test_the_ranks_move_in_step_and_their_waits_tell_them_apart():
    p = record.load(PROFILES / "cpu-ddp2-straggler")
    r0, r1 = p.ranks
    assert (r0["rank"], r1["rank"]) == (0, 1) and r0["pid"] != r1["pid"]
    assert abs(r0["step_s_median"] / r1["step_s_median"] - 1) < 0.05  # one pace for all ranks
    assert r1["wait_s_median"] > 5 * r0["wait_s_median"] and r0["compute_s_median"] > r1["compute_s_median"]
    assert (r0["workers"], r1["workers"]) == (1, 0)  # from the sampler's per-rank processes
    assert p.summary["world_size"] == 2
    assert abs(p.summary["images_per_s"] - r0["images_per_s"] - r1["images_per_s"]) < 1e-6
    f = from_profile(p, PROFILES / "cpu-ddp2-straggler")
    assert f["ranks.count"] == 2 and f["ranks.straggler"] == 1 and f["ranks.batch_per_rank"] == 4


def rank(r, wait, step=0.1, workers=4.0):
    return {"rank": r, "wait_s_median": wait, "step_s_median": step, "workers": workers}


def test_the_straggler_rule_needs_a_wait_beyond_the_others_not_a_busy_loader():
    rules = load_rules()

    def fires(rows):
        f: dict = {}
        _rank_facts(f, rows, {"batch": 64})
        return "DD201" in {x.id for x in evaluate(rules, f)[0]}

    assert fires([rank(0, 0.002), rank(1, 0.002), rank(2, 0.030), rank(3, 0.003)])
    assert not fires([rank(0, 0.030), rank(1, 0.031), rank(2, 0.032), rank(3, 0.030)])  # all slow alike: the loader
    assert not fires([rank(0, 0.0001), rank(1, 0.0015)])  # 14x more, but 1.4 ms: noise, not a straggler
    assert not fires([rank(0, 0.03)])  # a single process has no ranks


def test_workers_over_cores_small_batch_per_gpu_and_collectives():
    rules = load_rules()
    base = {"run.device": "cuda", "ranks.count": 4.0, "cpu.usable": 16.0, "settings.workers": 8.0,
            "ranks.workers_total": 32.0, "ranks.batch_per_rank": 4.0, "run.batch": 16.0, "settings.nbs": 64.0,
            "run.data_wait_share": 0.01, "trace.cuda": True, "trace.nccl_share": 0.45, "trace.nccl_ms": 9.0,
            "trace.kernel_busy_ms": 20.0}
    found = {f.id: f for f in evaluate(rules, base)[0]}
    assert found["DD202"].fix.args == {"workers": 3}  # (16 cores - 4 ranks) / 4 ranks
    assert found["DD203"].fix.args == {"batch": 64}  # 16 per GPU, within nbs
    assert "45% of rank 0's GPU time" in found["DD204"].message and "n/a active NVLink" in found["DD204"].message
    assert "has 0 active NVLink links (0: the gradients cross PCIe)" in \
        {f.id: f for f in evaluate(rules, {**base, "gpu.nvlink_links": 0.0})[0]}["DD204"].message
    calm = {**base, "ranks.workers_total": 12.0, "ranks.batch_per_rank": 32.0, "run.batch": 128.0,
            "trace.nccl_share": 0.1}
    assert not {"DD202", "DD203", "DD204"} & {f.id for f in evaluate(rules, calm)[0]}
    single = {k: v for k, v in base.items() if not k.startswith("ranks.")}
    assert not {"DD202", "DD203", "DD204"} & {f.id for f in evaluate(rules, single)[0]}


def test_the_live_facts_follow_every_rank(tmp_path):
    import gzip
    import shutil

    from yolodoctor.diagnosis.facts import live

    run = tmp_path / "run"
    shutil.copytree(PROFILES / "cpu-ddp2-straggler", run)
    for gz in run.glob("*.jsonl.gz"):  # a live run's streams are plain files
        gz.with_suffix("").write_bytes(gzip.decompress(gz.read_bytes()))
        gz.unlink()
    f = live(run, window_s=1e9)
    assert f["ranks.count"] == 2 and f["ranks.straggler"] == 1 and f["ranks.wait_excess_share"] > 0.1
    # the whole training's rate, as profile.json gives it, not rank 0's alone
    recorded = record.load(PROFILES / "cpu-ddp2-straggler").summary["images_per_s"]
    assert 0.8 < f["run.images_per_s"] / recorded < 1.25


def test_the_verdict_names_the_straggler_not_rank_0s_compute_and_the_report_shows_every_rank():
    import os
    import subprocess
    import sys

    from yolodoctor.presentation.verdict import verdict

    d = diagnose(PROFILES / "cpu-ddp2-straggler")
    v = verdict(d.facts, d.reported, d.run_dir, d.profile)
    # rank 0 waits 5% and computes 95% of its step, but 38 ms of that compute is the all-reduce waiting for rank 1
    assert v.bound == "input" and v.headline.startswith("Rank 1 waits 37 ms per step for its data")
    b = diagnose(PROFILES / "cpu-ddp2-balanced")
    assert verdict(b.facts, b.reported, b.run_dir, b.profile).bound == "cpu"
    assert "cpu.train_thread_pct" not in d.facts  # the sampled process is the launcher: it trains nothing
    out = subprocess.run([sys.executable, "-m", "yolodoctor", "diagnose", str(PROFILES / "cpu-ddp2-straggler")],
                         capture_output=True, text=True, env={**os.environ, "COLUMNS": "120"}).stdout
    assert "rank 1        step 110.5 ms, data wait 36.5 ms, compute 70.5 ms, 0 worker(s)" in out
