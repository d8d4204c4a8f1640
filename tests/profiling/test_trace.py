from pathlib import Path

import pytest

from yolodoctor.profiling.trace import Ev, summarise


def test_cpu_only_trace_has_no_kernel_facts():
    s = summarise([Ev("aten::conv2d", "cpu", 0, 50, 40), Ev("aten::item", "cpu", 60, 5, 5)], steps=1)
    assert s["cuda"] is False and s["kernels_per_step"] is None and s["cpu_ops_per_step"] == 2
    assert s["sync_calls_per_step"] == {"aten::item": 1.0}


def test_kernel_facts_per_step():
    evs = [
        Ev("sm90_xmma_fprop_implicit_gemm_bf16", "cuda", 0, 100),   # tensor core, overlaps the next
        Ev("elementwise_kernel", "cuda", 50, 100),
        Ev("tiny_kernel", "cuda", 300, 4),                         # short
        Ev("tiny_kernel", "cuda", 400, 6),                         # short
        Ev("Memcpy HtoD (Pageable -> Device)", "cuda", 500, 20),
        Ev("Memcpy HtoD (Pinned -> Device)", "cuda", 600, 20),
        Ev("cudaLaunchKernel", "cpu", 0, 3), Ev("cudaLaunchKernel", "cpu", 10, 3),
        Ev("cudaLaunchKernel", "cpu", 20, 3), Ev("cudaLaunchKernel", "cpu", 30, 3),
        Ev("cudaStreamSynchronize", "cpu", 40, 100),
    ]
    s = summarise(evs, steps=2, wall_s=0.001)
    assert s["kernels_per_step"] == 2
    assert s["kernel_busy_ms_per_step"] == (150 + 4 + 6) / 1000 / 2  # overlap counted once
    assert s["short_kernel_share"] == 0.5
    assert abs(s["tensor_core_share"] - 100 / 210) < 1e-9
    assert s["memcpy_per_step"] == {"h2d_pageable": 0.5, "h2d_pinned": 0.5}
    assert s["launches_per_step"] == 2 and s["launch_cpu_ms_per_step"] == 0.006
    assert s["sync_calls_per_step"] == {"cudaStreamSynchronize": 0.5}
    assert s["top_kernels"][0]["name"].startswith("sm90_xmma") or s["top_kernels"][0]["name"] == "elementwise_kernel"
    assert 0 < s["gpu_busy_share"] <= 1


def test_export_gz_leaves_no_uncompressed_trace_when_the_copy_fails(tmp_path, monkeypatch):
    import gzip as gz

    from yolodoctor.profiling import trace as trace_mod

    class Prof:
        def export_chrome_trace(self, path):
            Path(path).write_text('{"traceEvents": []}')

    def full_disk(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(gz, "open", full_disk)
    with pytest.raises(OSError):
        trace_mod.export_gz(Prof(), tmp_path / "trace.json.gz")
    assert list(tmp_path.iterdir()) == []


def test_nccl_time_counts_only_where_no_computation_overlaps_it():
    gemm = Ev("sm90_xmma_gemm_bf16", "cuda", 0, 10_000)
    hidden = Ev("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "cuda", 2_000, 6_000)  # under the GEMM
    exposed = Ev("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "cuda", 10_000, 5_000)  # after it: the GPU only exchanges
    s = summarise([gemm, hidden], steps=1)
    assert s["nccl_ms_per_step"] == 0.0 and s["nccl_share"] == 0.0
    s = summarise([gemm, hidden, exposed], steps=1)
    assert s["nccl_ms_per_step"] == 5.0 and abs(s["nccl_share"] - 5 / 15) < 1e-9
    assert summarise([Ev("aten::mm", "cpu", 0, 5, 5)], steps=1)["nccl_share"] is None  # no kernels, no figure
