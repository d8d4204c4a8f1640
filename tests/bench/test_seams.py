"""bench/seams/sitecustomize.py: BENCH_SAMPLER_DUTY starts the sampler with its duty cycle; shipped code reads no
such variable."""

import runpy
import time
from pathlib import Path

from yolodoctor.profiling import sampler_process
from yolodoctor.profiling.sampler import read_records

ROOT = Path(__file__).resolve().parents[2]


def test_the_duty_seam_starts_a_real_sampler_that_pauses_and_resumes(tmp_path, monkeypatch):
    monkeypatch.setattr(sampler_process, "start_sampler", sampler_process.start_sampler)  # put back after the test
    monkeypatch.setenv("BENCH_SAMPLER_DUTY", "0.3,0.3")
    runpy.run_path(str(ROOT / "bench" / "seams" / "sitecustomize.py"))
    out = tmp_path / "s.jsonl"
    proc = sampler_process.start_sampler(__import__("os").getpid(), out, hz=20, gpu=False)
    time.sleep(1.5)
    sampler_process.stop_sampler(proc)
    kinds = [r["type"] for r in read_records(out)]
    assert "sampler_pause" in kinds and "sampler_resume" in kinds, kinds


def test_shipped_code_reads_no_test_or_benchmark_variable():
    text = "\n".join(p.read_text() for p in (ROOT / "yolodoctor").rglob("*.py"))
    for name in ("YD_TEST_FAULT", "BENCH_SAMPLER_DUTY", "YOLODOCTOR_FAULT", "YOLODOCTOR_SAMPLER_DUTY"):
        assert name not in text
