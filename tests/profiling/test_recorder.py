"""The recorder's allocator counters, read from a fake torch.cuda (the GPU test compares them with torch's own)."""

from yolodoctor.profiling.recorder import allocator_counters


class FakeCuda:
    def __init__(self, stats):
        self.stats = stats
        self.calls = 0

    def memory_stats_as_nested_dict(self):
        self.calls += 1
        return self.stats


def test_allocator_counters_read_current_peak_and_reserved_in_one_call():
    cuda = FakeCuda({"allocated_bytes": {"all": {"current": 10, "peak": 30, "freed": 5},
                                         "large_pool": {"current": 8, "peak": 20}},
                     "reserved_bytes": {"all": {"current": 64, "peak": 96}}})
    assert allocator_counters(cuda) == {"mem_allocated": 10, "mem_allocated_peak": 30, "mem_reserved": 64,
                                        "mem_reserved_peak": 96}
    assert cuda.calls == 1


def test_allocator_counters_of_an_uninitialised_allocator_are_zero():
    # torch returns {} before CUDA is initialised
    assert allocator_counters(FakeCuda({})) == {"mem_allocated": 0, "mem_allocated_peak": 0, "mem_reserved": 0,
                                                "mem_reserved_peak": 0}


def test_grad_scale_reads_the_fp16_scaler_and_counts_its_halvings():
    # a real GradScaler on the CPU: 2**16 before any step, halved by each step whose gradients overflow (skipped)
    import types

    import torch

    from yolodoctor.profiling.recorder import grad_scale

    p = torch.nn.Parameter(torch.ones(2))
    opt = torch.optim.SGD([p], lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    trainer = types.SimpleNamespace(scaler=scaler)
    assert grad_scale(trainer) == 2.0 ** 16
    for _ in range(3):  # three overflowing steps: skipped, the scale halves each time, the weights stay
        opt.zero_grad()
        scaler.scale((p * float("inf")).sum()).backward()
        scaler.step(opt)
        scaler.update()
    assert grad_scale(trainer) == 2.0 ** 13 and torch.equal(p.detach(), torch.ones(2))
    assert grad_scale(types.SimpleNamespace(scaler=torch.amp.GradScaler("cpu", enabled=False))) is None  # bf16
    assert grad_scale(types.SimpleNamespace()) is None

    class Broken:
        def is_enabled(self):
            raise RuntimeError("gone")

    assert grad_scale(types.SimpleNamespace(scaler=Broken())) is None
