from types import SimpleNamespace

import cv2
import numpy as np
import pytest

from yolodoctor.check.storage import probe_storage


def write_images(tmp_path, n, ext, size):
    rng = np.random.default_rng(0)
    paths = []
    for i in range(n):
        im = cv2.GaussianBlur(rng.integers(0, 255, (size[1], size[0], 3), dtype=np.uint8), (5, 5), 0)
        p = tmp_path / f"{i:03d}.{ext}"
        cv2.imwrite(str(p), im)
        paths.append(p)
    return paths


@pytest.fixture
def gpu_facts(tmp_path):
    return {"env.device_kind": "cuda", "loader.workers_effective": 2, "dataset.root": str(tmp_path)}


def test_measures_cold_read_and_decode(tmp_path, gpu_facts):
    paths = write_images(tmp_path, 6, "jpg", (320, 240))
    res = probe_storage(paths, {"imgsz": 160}, gpu_facts)
    f = res.facts
    assert f["io.cache_state"] == "cold" and f["io.sample_files"] == 6
    assert f["io.read_mb_s"] > 0 and f["io.decode_ms_median"] > 0
    assert f["io.images_per_s_per_core"] == pytest.approx(
        1000 / (f["io.read_ms_per_image"] + f["io.decode_ms_median"] + f["io.resize_ms_median"]), rel=0.01)
    assert probe_storage(paths, {"imgsz": 160}, gpu_facts, cold=False).facts["io.cache_state"] == "warm"


def test_huge_png_is_expensive_decode(tmp_path, gpu_facts):
    paths = write_images(tmp_path, 3, "png", (4000, 3000))
    res = probe_storage(paths, {"imgsz": 640}, dict(gpu_facts, **{"cache.ram_fits": True}))
    f = next(f for f in res.findings if f.id == "IO103")
    assert f.evidence["decode_ms_median"] > 10
    assert f.fix.args == {"cache": "ram"}


def test_small_jpegs_are_not_flagged(tmp_path, gpu_facts):
    paths = write_images(tmp_path, 4, "jpg", (64, 48))
    assert not [f for f in probe_storage(paths, {"imgsz": 64}, gpu_facts).findings if f.id == "IO103"]


def test_network_filesystem(tmp_path, gpu_facts):
    paths = write_images(tmp_path, 2, "jpg", (64, 48))
    mounts = [SimpleNamespace(device="srv:/data", mountpoint=str(tmp_path), fstype="nfs4"),
              SimpleNamespace(device="/dev/vda", mountpoint="/", fstype="ext4")]
    res = probe_storage(paths, {"imgsz": 64}, gpu_facts, partitions=mounts)
    f = next(f for f in res.findings if f.id == "IO101")
    assert f.evidence["mount"]["fstype"] == "nfs4"
    assert res.facts["io.network_fs"] is True


def test_no_images_no_facts():
    assert probe_storage([], {}, {}).facts == {}


def test_an_unreadable_image_is_left_out_of_the_timing(tmp_path, gpu_facts):
    # the dataset scan reports it (a finding); the storage probe times the rest instead of failing check
    paths = write_images(tmp_path, 4, "jpg", (320, 240))
    (tmp_path / "folder.jpg").mkdir()
    (tmp_path / "gone.jpg").symlink_to(tmp_path / "missing.jpg")
    res = probe_storage([*paths, tmp_path / "folder.jpg", tmp_path / "gone.jpg"], {"imgsz": 160}, gpu_facts)
    assert res.facts["io.sample_files"] == 4 and res.facts["io.decode_ms_median"] > 0
    assert probe_storage([tmp_path / "gone.jpg"], {"imgsz": 160}, gpu_facts).facts.get("io.sample_files") is None
