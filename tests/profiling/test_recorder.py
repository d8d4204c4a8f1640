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


def test_a_classification_dataset_reads_its_own_cache_flags_and_has_no_mosaic():
    # ClassificationDataset (ultralytics/data/dataset.py) has cache_ram / cache_disk and no cache, close_mosaic or
    # transforms; its trainer's args still carry mosaic=1.0 and close_mosaic=10, unused
    from types import SimpleNamespace

    from yolodoctor.profiling.recorder import _cache_active, _mosaic_buffer, _mosaic_on

    cls_ds = SimpleNamespace(cache_ram=True, cache_disk=False, torch_transforms=None)
    args = SimpleNamespace(mosaic=1.0, close_mosaic=10)
    trainer = SimpleNamespace(args=args, epoch=0, epochs=100, train_loader=SimpleNamespace(dataset=cls_ds))
    assert _cache_active(cls_ds) == "ram" and not _mosaic_on(trainer) and _mosaic_buffer(cls_ds) is None
    assert _cache_active(SimpleNamespace(cache_ram=False, cache_disk=True)) == "disk"
    assert _cache_active(SimpleNamespace(cache_ram=False, cache_disk=False)) is None
    det_ds = SimpleNamespace(cache="ram", close_mosaic=lambda hyp: None, transforms=None)
    det = SimpleNamespace(args=args, epoch=0, epochs=100, train_loader=SimpleNamespace(dataset=det_ds))
    assert _cache_active(det_ds) == "ram" and _mosaic_on(det)  # detection: as before


def test_classifications_own_messages_are_recorded():
    # the messages Ultralytics 8.4 logs for a classification folder (data/dataset.py, data/utils.py, data/split.py)
    from yolodoctor.profiling.ultralytics_log import classify

    assert classify("val: Skipping 3 samples from classes the model lacks: ['x']") == (
        "cls_classes_skipped", ["3", "['x']"])
    assert classify("train: Skipping caching images to disk, directory not writable")[0] == "cache_disk_refused"
    assert classify("Splitting /d (3 classes) into 80% train, 20% val...") == ("cls_split_copied", ["/d (3 classes)",
                                                                                                    "80"])
    assert classify("val: /d/val... found 6 images in 2 classes (requires 3 classes, not 2)")[0] == \
        "cls_classes_mismatch"
