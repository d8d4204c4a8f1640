"""record/ranks.py: a DDP training's streams found by name, each rank summarised over its own window."""

import json

from yolodoctor.record import ranks


def write_stream(path, pid, wait, n=40, start=0.0):
    t = start
    lines = [{"type": "run_start", "t": t, "pid": pid}]
    for i in range(n):
        t0 = t + wait
        lines.append({"type": "step", "t": t0 + 0.1, "step": i, "n": i, "t0": t0, "t1": t0 + 0.1 - wait,
                      "wait": wait, "compute": 0.1 - wait, "images": 4})
        t = t0 + 0.1 - wait
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_a_single_process_has_no_ranks(tmp_path):
    write_stream(tmp_path / "events.jsonl", 10, 0.001)
    assert ranks.streams(tmp_path) == {} and ranks.summarise(tmp_path) is None


def test_each_rank_is_summarised_from_its_own_stream_and_samples(tmp_path):
    write_stream(tmp_path / "events.jsonl", 10, 0.002)
    write_stream(tmp_path / "events-rank1.jsonl", 11, 0.03)
    (tmp_path / "events-rank3.jsonl.gz").write_bytes(b"")  # a recorded fixture's compressed stream counts too
    assert list(ranks.streams(tmp_path)) == [0, 1, 3]
    gpu = {"index": 1, "uuid": "GPU-1", "util": 88, "mem_used": 5 << 30}
    samples = [{"type": "sample", "t": 3.5, "ranks": {"0": {"pid": 10, "cpu": 90.0, "workers": 2, "workers_cpu": 40.0,
                                                            "gpu": gpu},
                                                      "1": {"pid": 11, "cpu": 60.0, "workers": 0, "workers_cpu": 0.0}}},
               {"type": "sample", "t": 1e9, "ranks": {"0": {"pid": 10, "cpu": 1.0, "workers": 9}}}]  # past the window
    rows = ranks.summarise(tmp_path, samples)
    by = {r["rank"]: r for r in rows}
    assert by[0]["pid"] == 10 and by[1]["pid"] == 11
    assert abs(by[1]["wait_s_median"] - 0.03) < 1e-9 and abs(by[0]["wait_s_median"] - 0.002) < 1e-9
    assert (by[0]["cpu_pct"], by[0]["workers"], by[1]["workers"]) == (90.0, 2, 0)
    assert (by[0]["gpu_uuid"], by[0]["gpu_util_pct"], by[0]["gpu_mem_used_max"]) == ("GPU-1", 88, 5 << 30)
    assert "gpu_uuid" not in by[1]  # no GPU seen for that rank's process
    assert by[3]["steps"] == 0 and "cpu_pct" not in by[3]  # an empty stream: a row with nothing measured
