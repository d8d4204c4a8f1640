"""The monitor's model and sources without the UI: tailing, rolling-window facts, hysteresis, the final state."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from yolodoctor.diagnosis import facts as facts_mod
from yolodoctor.diagnosis.engine import evaluate
from yolodoctor.monitor.model import LiveState
from yolodoctor.monitor.source import ReplaySource, RunDirSource, Tail

PROFILES = Path(__file__).resolve().parents[2] / "fixtures" / "profiles"


def expected_ids(name: str) -> list[str]:
    return [f["id"] for f in json.loads((PROFILES / name / "expected-findings.json").read_text())]


def test_tail_gives_complete_lines_once(tmp_path):
    path = tmp_path / "events.jsonl"
    tail = Tail(path)
    assert tail.read() == []  # not there yet
    path.write_text('{"type": "a", "t": 1}\n{"type": "b", "t": 2}\n{"type": "c", "t"')
    assert [r["type"] for r in tail.read()] == ["a", "b"]
    assert tail.read() == []
    with open(path, "a") as fh:
        fh.write(': 3}\nnot json\n{"no_type": 1}\n')
    assert [r["type"] for r in tail.read()] == ["c"]
    gz = tmp_path / "old.jsonl"
    with gzip.open(f"{gz}.gz", "wt") as fh:
        fh.write('{"type": "x", "t": 1}\n')
    old = Tail(gz)
    assert [r["type"] for r in old.read()] == ["x"] and old.read() == []  # a finished recording, read once


def hysteresis(raw: list[set[str]], on: int, off: int) -> list[set[str]]:
    """Reference: an id is active from its on-th consecutive true poll until its off-th consecutive false one."""
    active: set[str] = set()
    true: dict[str, int] = {}
    false: dict[str, int] = {}
    out = []
    for fired in raw:
        for rid in fired | set(true) | set(false):
            if rid in fired:
                true[rid], false[rid] = true.get(rid, 0) + 1, 0
                if true[rid] >= on:
                    active.add(rid)
            else:
                false[rid], true[rid] = false.get(rid, 0) + 1, 0
                if false[rid] >= off:
                    active.discard(rid)
        out.append(set(active))
    return out


def replay_polls(rules, name: str = "h200-defaults"):
    """Per poll of a replay: the rules' raw verdict on the window's facts, and what the monitor shows."""
    src = ReplaySource(PROFILES / name, rules=rules)
    raw, shown = [], []
    while (snap := src.poll()) is not None and not snap.final:
        raw.append({f.id for f in evaluate(rules, src.state.facts)[0]})
        shown.append({f.id for f in snap.findings})
    return raw, shown, src


def test_findings_appear_and_clear_with_hysteresis(rules):
    raw, shown, src = replay_polls(rules)
    on, off = src.state.engine.on, src.state.engine.off
    assert (on, off) == (3, 5)
    assert shown == hysteresis(raw, on, off)
    # the replay crosses RN201 (window too short): it shows on the third true poll and leaves on the fifth false one
    first = next(i for i, r in enumerate(raw) if "RN201" in r)
    assert all("RN201" in r for r in raw[first:first + on])
    assert "RN201" not in shown[first + on - 2] and "RN201" in shown[first + on - 1]
    cleared = next(i for i in range(first, len(raw)) if "RN201" not in raw[i])
    assert all("RN201" in s for s in shown[cleared:cleared + off - 1])
    assert "RN201" not in shown[cleared + off - 1]
    assert any(r != s for r, s in zip(raw, shown, strict=False))  # hysteresis did something


@pytest.mark.parametrize("window", [4.0, 0.2])  # 0.2 s: at the end the window holds only trace-window steps
def test_live_window_facts_match_diagnosis_live(window, rules, recorded, first_step, tmp_path):
    """LiveState keeps only a window in memory; its facts are those of diagnosis.facts.live on the files."""
    events, samples, t0 = recorded("h200-defaults")
    k0 = first_step("h200-defaults")
    state = LiveState(rules, window_s=window)
    for k in range(0, k0 + 13):  # one recorded second per feed, as a 1 Hz monitor reads them
        lo, until = (t0 + k - 1, t0 + k) if k else (float("-inf"), t0)
        state.feed([e for e in events if lo < e["t"] <= until], [s for s in samples if lo < s["t"] <= until])
        if k not in (k0 + 2, k0 + 6, k0 + 12):
            continue
        (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events if e["t"] <= until))
        (tmp_path / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples if s["t"] <= until))
        mine, theirs = state.window_facts(), facts_mod.live(tmp_path, window_s=window)
        keys = [k for k in theirs if k.startswith(("run.", "cpu.", "loader.", "settings.", "trace."))
                or k in ("gpu.util_mean", "gpu.mem_fraction_peak")]
        assert len(keys) > 20
        assert {k: mine.get(k) for k in keys} == pytest.approx({k: theirs[k] for k in keys})
    assert 0 < len(state.steps) < sum(e["type"] == "step" for e in events)  # only the window is kept


@pytest.mark.parametrize("name", ["h200-defaults", "h200-workers0", "cpu-classify-png-decode"])
def test_replay_ends_with_the_runs_diagnosis(rules, name):
    src = ReplaySource(PROFILES / name, rules=rules, speed=5.0)
    snaps = []
    while (snap := src.poll()) is not None:
        snaps.append(snap)
    last = snaps[-1]
    assert last.final and last.ended is not None and last.ended.status == "complete"
    assert [f.id for f in last.findings] == expected_ids(name)  # the golden diagnosis of the recording
    assert src.poll() is None  # the final state stays; nothing more to show
    assert not any(s.final for s in snaps[:-1])


def test_run_dir_source_tails_a_growing_run(rules, recorded, tmp_path):
    events, samples, _t0 = recorded("h200-workers0")
    run = tmp_path / "live"
    run.mkdir()
    prof = json.loads((PROFILES / "h200-workers0" / "profile.json").read_text())
    (run / "profile.json").write_text(json.dumps({**prof, "status": "running", "reason": None}))
    src = RunDirSource(run, rules=rules)
    assert src.poll().waiting.startswith("waiting for records")
    ev = "".join(json.dumps(e) + "\n" for e in events)
    sm = "".join(json.dumps(s) + "\n" for s in samples)
    steps_seen = []
    for part in range(1, 11):  # ten chunks, each cut mid-line
        with open(run / "events.jsonl", "a") as fh:
            fh.write(ev[len(ev) * (part - 1) // 10: len(ev) * part // 10])
        with open(run / "samples.jsonl", "a") as fh:
            fh.write(sm[len(sm) * (part - 1) // 10: len(sm) * part // 10])
        snap = src.poll()
        assert snap.ended is None  # profile.json still says running
        steps_seen.append(snap.train["step"])
    seen = [s for s in steps_seen if s is not None]
    assert len(set(seen)) > 3 and seen == sorted(seen)
    written = [e for e in events if e["type"] == "step"]
    assert snap.train["step"] == written[-1]["step"] and snap.train["loss"] == written[-1]["loss"]
    assert snap.sample["t"] == [s for s in samples if s["type"] == "sample"][-1]["t"]
    (run / "profile.json").write_text(json.dumps(prof))  # the runner finalises the record
    final = src.poll()
    assert final.ended.status == "complete" and final.final
    assert [f.id for f in final.findings] == expected_ids("h200-workers0")
    assert src.poll() is None


def test_an_incomplete_run_says_why(rules, copy_run):
    run = copy_run("h200-workers0", status="incomplete",
                   reason="out-of-memory: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB")
    snap = RunDirSource(run, rules=rules).poll()
    assert snap.ended.status == "incomplete" and snap.ended.reason.startswith("out-of-memory")
    assert snap.findings[0].id == "MM201"  # how it ended comes first, then the diagnosis


class FakeLaunch:
    log_path = Path("/tmp/x.log")

    def __init__(self, rc, said):
        self.rc, self.said = rc, said

    def poll(self):
        return self.rc

    def last_line(self):
        return self.said


def test_a_launch_that_dies_without_a_record(rules, tmp_path):
    run = tmp_path / "never"
    src = RunDirSource(run, rules=rules, launch=FakeLaunch(None, ""))
    assert src.poll().waiting.startswith("starting the training")
    src.launch = FakeLaunch(2, "yolodoctor: error: cannot read data.yaml")
    snap = src.poll()
    assert snap.ended.status == "incomplete" and snap.ended.exit_code == 2
    assert "exited with code 2" in snap.ended.reason and "cannot read data.yaml" in snap.ended.reason


def test_attaching_to_a_finished_run_draws_its_history(rules, recorded):
    """A backlog is fed one recorded second at a time: the graphs show the run, not one point."""
    _, samples, _ = recorded("h200-defaults")
    ticks = [s["t"] for s in samples if s["type"] == "sample"]
    snap = RunDirSource(PROFILES / "h200-defaults", rules=rules).poll()
    assert snap.final and len(snap.history["gpu_util"]) == pytest.approx(ticks[-1] - ticks[0], abs=2)
    assert len(snap.history["step_s"]) > 5


def test_tail_of_a_fifo_fails_at_once_instead_of_waiting_for_a_writer(tmp_path):
    import os

    fifo = tmp_path / "events.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        Tail(fifo).read()  # the app shows "monitor source failed: ..." for this


def test_a_ddp_run_is_followed_on_every_rank_as_it_grows(rules, tmp_path):
    # the recorded two-rank straggler, written out as a live run: rank 1's stream appears beside rank 0's
    run = tmp_path / "live"
    run.mkdir()
    src_dir = PROFILES / "cpu-ddp2-straggler"
    prof = json.loads((src_dir / "profile.json").read_text())
    (run / "profile.json").write_text(json.dumps({**prof, "status": "running", "reason": None, "ranks": None}))
    (run / "spec.json").write_text((src_dir / "spec.json").read_text())
    src = RunDirSource(run, rules=rules)
    src.poll()
    for name in ("events.jsonl", "samples.jsonl", "events-rank1.jsonl"):
        (run / name).write_bytes(gzip.decompress((src_dir / f"{name}.gz").read_bytes()))
    snap = src.poll()  # reads every stream, rank 1's too, and evaluates once
    for _ in range(3):  # the live engine names a finding after 3 evaluations that agree
        src.state.evaluate()
    fired = {f.id for f in src.state.engine.active.values()}
    f = src.state.facts
    assert f["ranks.count"] == 2 and f["ranks.straggler"] == 1 and snap.train["ranks"] == 2
    assert f["run.images_per_s"] / prof["summary"]["images_per_s"] > 0.8  # the ranks summed, not rank 0 alone
    assert "DD201" in fired
