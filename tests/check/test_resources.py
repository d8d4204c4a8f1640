from yolodoctor.check.resources import (
    batch_bytes,
    cache_bytes_per_image,
    effective_workers,
    probe_resources,
)

GB = 1 << 30
GPU_FACTS = {"env.device_kind": "cuda", "env.torch_devices": [{"index": 0}], "dataset.images.train": 20000,
             "dataset.image_size_median": [640, 480]}


def probe(args, facts=GPU_FACTS, cpu_count=16, usable=16.0, available=64 * GB, shm=32 * GB):
    return probe_resources(args, dict(facts), cpu_count=cpu_count, usable=usable,
                           mem={"total": 2 * available, "available": available}, shm_free=shm)


def ids(res):
    return sorted(f.id for f in res.findings)


def test_ultralytics_worker_clamp():
    assert effective_workers(8, cpu_count=16, cuda_devices=1, device_kind="cuda", images=20000, batch=16) == 8
    assert effective_workers(16, cpu_count=16, cuda_devices=2, device_kind="cuda", images=20000, batch=16) == 8
    assert effective_workers(8, cpu_count=16, cuda_devices=1, device_kind="cuda", images=40, batch=16) == 3
    assert effective_workers(8, cpu_count=16, cuda_devices=1, device_kind="cuda", images=10, batch=16) == 0
    assert effective_workers(8, cpu_count=16, cuda_devices=0, device_kind="cpu", images=20000, batch=16) == 0


def test_cache_and_batch_sizes():
    assert cache_bytes_per_image(640, 480, 640) == 640 * 480 * 3
    assert cache_bytes_per_image(4000, 3000, 640) == 640 * 480 * 3
    assert batch_bytes(16, 640) == 16 * 3 * 640 * 640


def test_workers_above_cgroup_quota():
    res = probe({"workers": 8, "batch": 16, "imgsz": 640}, usable=4.0)
    f = next(f for f in res.findings if f.id == "DL101")
    assert f.fix.args == {"workers": 3} and f.evidence["usable_cpus"] == 4.0
    assert "DL101" not in ids(probe({"workers": 8, "batch": 16, "imgsz": 640}))


def test_workers_clamped_info():
    res = probe({"workers": 32, "batch": 16, "imgsz": 640})
    assert ids(res) == ["DL102"] and res.facts["loader.workers_effective"] == 16


def test_shm_too_small_for_prefetch_queue():
    # 16 workers x 4 batches x 128 images x 640x640x3 = 10 GB of /dev/shm
    res = probe({"workers": 16, "batch": 128, "imgsz": 640}, shm=2 * GB)
    f = next(f for f in res.findings if f.id == "MM102")
    assert f.severity.name == "error" and 9.0 < f.evidence["prefetch_gb"] < 10.0
    assert f.fix.args["workers"] < 16
    assert "MM102" not in ids(probe({"workers": 16, "batch": 128, "imgsz": 640}, shm=16 * GB))


def test_pinned_queue_large_share_of_ram():
    res = probe({"workers": 16, "batch": 128, "imgsz": 640}, available=16 * GB)
    assert "MM104" in ids(res)


def test_cache_ram_short_and_fits():
    res = probe({"cache": "ram", "workers": 8, "batch": 16, "imgsz": 640}, available=8 * GB)
    f = next(f for f in res.findings if f.id == "MM101")
    # 20000 x 640x480x3 = 17.2 GiB of resized images, twice that required
    assert abs(f.evidence["required_gb"] - 2 * 20000 * 640 * 480 * 3 / GB) < 0.01
    assert f.fix.args == {"cache": False}
    ok = probe({"cache": True, "workers": 8, "batch": 16, "imgsz": 640}, available=64 * GB)
    assert "MM101" not in ids(ok) and ok.facts["cache.ram_fits"] is True


def test_cache_copied_per_worker_when_shm_small():
    res = probe({"cache": "ram", "workers": 8, "batch": 16, "imgsz": 640}, available=64 * GB, shm=20 * GB)
    f = next(f for f in res.findings if f.id == "MM103")
    assert f.evidence["workers"] == 8


def test_cpu_device_has_no_loader_findings():
    facts = dict(GPU_FACTS, **{"env.device_kind": "cpu", "env.torch_devices": []})
    res = probe({"workers": 64, "batch": 128}, facts=facts, usable=2.0, shm=1)
    assert res.facts["loader.workers_effective"] == 0 and ids(res) == []
