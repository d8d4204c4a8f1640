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
                     "reserved_bytes": {"all": {"current": 64, "peak": 64}}})
    assert allocator_counters(cuda) == {"mem_allocated": 10, "mem_allocated_peak": 30, "mem_reserved": 64}
    assert cuda.calls == 1


def test_allocator_counters_of_an_uninitialised_allocator_are_zero():
    # torch returns {} before CUDA is initialised
    assert allocator_counters(FakeCuda({})) == {"mem_allocated": 0, "mem_allocated_peak": 0, "mem_reserved": 0}
