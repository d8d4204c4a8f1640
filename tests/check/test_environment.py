from fakes import H200, H200_UUID, T4, FakeNvmlLib, torch_info, ultra_info

from yolodoctor.api.nvml import Nvml
from yolodoctor.check.environment import capabilities, match_devices, probe_environment


def probe(args=None, gpus=(), torch_gpus=None, environ=None, online=False, nvml=None, **ultra):
    nvml = nvml or Nvml.open(FakeNvmlLib(list(gpus)))
    tg = gpus if torch_gpus is None else torch_gpus
    return probe_environment(args or {}, nvml=nvml, torch_info=torch_info(*tg), ultra_info=ultra_info(**ultra),
                             environ=environ if environ is not None else {}, is_online=online)


def ids(res):
    return sorted(f.id for f in res.findings)


def test_cpu_machine_reports_no_gpu_as_fact():
    nvml = Nvml.open(FakeNvmlLib([], init_error="NVML Shared Library Not Found"))
    res = probe(nvml=nvml, environ={"YOLO_OFFLINE": "1"})
    assert ids(res) == ["EN101"]
    assert res.facts["env.device_kind"] == "cpu"
    assert res.facts["env.nvml"] is False and "Library Not Found" in res.facts["env.nvml_reason"]


def test_h200_matched_by_uuid_and_capabilities():
    res = probe({"amp": True}, gpus=[H200], environ={"YOLO_OFFLINE": "1"})
    assert res.facts["env.device_map"] == [{"torch_index": 0, "nvml_index": 0, "uuid": H200_UUID[4:]}]
    assert res.facts["gpu.supports_bf16"] is True and res.facts["gpu.supports_tf32"] is True
    assert "EN102" not in ids(res)
    bf16 = next(f for f in res.findings if f.id == "EN120")
    assert bf16.fix.args == {"amp": "bf16"} and bf16.fix.safety == "unsafe" and bf16.fix.changes_training


def test_torch_nvml_disagreement_is_reported():
    # NVML sees two GPUs, torch only one (e.g. CUDA_VISIBLE_DEVICES applied to torch but a UUID mismatch)
    res = probe(gpus=[H200, T4], torch_gpus=[H200])
    f = next(f for f in res.findings if f.id == "EN102")
    assert "torch sees 1" in f.message and "NVML 2" in f.message


def test_cuda_visible_devices_filters_nvml_by_uuid_prefix():
    res = probe(gpus=[H200, T4], torch_gpus=[T4], environ={"CUDA_VISIBLE_DEVICES": "GPU-0a0b0c0d"})
    assert "EN102" not in ids(res)
    assert [g["name"] for g in res.facts["env.nvml_gpus"]] == ["Tesla T4"]


def test_gpu_seen_by_nvml_but_not_torch():
    res = probe({"device": "0"}, gpus=[H200], torch_gpus=[])
    f = next(f for f in res.findings if f.id == "EN103")
    assert f.severity.name == "error"  # the user asked for the GPU: training would fail or crawl
    res = probe({}, gpus=[H200], torch_gpus=[])
    assert next(f for f in res.findings if f.id == "EN103").severity.name == "warning"


def test_amp_check_download_offline_hazard_and_fix():
    res = probe({"amp": True}, gpus=[H200], online=False)
    f = next(f for f in res.findings if f.id == "EN110")
    assert f.severity.name == "warning" and f.fix.env == {"YOLO_OFFLINE": "1"}
    # weights already present: no download, no finding
    assert "EN110" not in ids(probe({"amp": True}, gpus=[H200], amp_weights_present=True))
    # bf16 skips check_amp entirely
    assert "EN110" not in ids(probe({"amp": "bf16"}, gpus=[H200]))
    # YOLO_OFFLINE=1 set: only an info that the check will be skipped, with no fix needed
    f = next(f for f in probe({"amp": True}, gpus=[H200], environ={"YOLO_OFFLINE": "1"}).findings if f.id == "EN110")
    assert f.severity.name == "info" and f.fix is None


def test_font_and_cloudpickle_hazards():
    res = probe({"device": "0,1"}, gpus=[H200, H200 | {"uuid": H200_UUID[:-1] + "7"}])
    assert {"EN111", "EN112"} <= set(ids(res))
    res = probe({"device": "0,1", "plots": False}, gpus=[H200], cloudpickle=True)
    assert not {"EN111", "EN112"} & set(ids(res))


def test_amp_broken_gpu_model():
    res = probe({}, gpus=[T4 | {"name": "NVIDIA GeForce GTX 1660"}])
    assert "EN121" in ids(res)


def test_nvml_errors_never_raise():
    lib = FakeNvmlLib([H200], fail={"nvmlDeviceGetUUID", "nvmlDeviceGetMemoryInfo", "nvmlSystemGetDriverVersion"})
    res = probe(gpus=[H200], nvml=Nvml.open(lib))
    assert res.facts["env.driver"] is None
    assert res.facts["env.nvml_gpus"][0]["memory_total"] is None
    assert "EN102" in ids(res)  # without UUIDs the devices cannot be matched, and we say so


def test_match_devices_and_capabilities():
    pairs, problems = match_devices([{"index": 0, "name": "x", "uuid": "abc"}], [])
    assert pairs[0]["nvml_index"] is None and len(problems) == 2
    assert capabilities((7, 0)) == {"amp": True, "bf16": False, "tf32": False}
    assert capabilities(None)["bf16"] is None


def test_real_machine_probe_runs():
    res = probe_environment({}, is_online=None)
    assert res.facts["env.torch"] and res.facts["env.ultralytics"].startswith("8.4")


def test_a_device_the_machine_does_not_have_is_an_error():
    one = probe({"device": 1}, gpus=[H200], environ={"YOLO_OFFLINE": "1"})
    assert "EN105" in ids(one) and "device=1 asks for CUDA device 1, but 1 CUDA device is visible" in \
        next(f.message for f in one.findings if f.id == "EN105")
    assert "EN105" not in ids(probe({"device": 0}, gpus=[H200], environ={"YOLO_OFFLINE": "1"}))
    assert "EN105" not in ids(probe({"device": -1}, gpus=[H200], environ={"YOLO_OFFLINE": "1"}))  # -1: the idlest GPU
    cpu = probe({"device": "0"}, nvml=Nvml.open(FakeNvmlLib([], init_error="no NVML")), environ={"YOLO_OFFLINE": "1"})
    assert ids(cpu) == ["EN101", "EN105"]
    assert ids(probe({"device": "cpu"}, nvml=Nvml.open(FakeNvmlLib([], init_error="no NVML")),
                     environ={"YOLO_OFFLINE": "1"})) == ["EN101"]


def test_profile_refuses_before_training_a_device_nvml_does_not_list(monkeypatch):
    import pytest

    import yolodoctor.api.nvml as nvml_api
    from yolodoctor.check.run import quick_check
    from yolodoctor.errors import UsageError

    monkeypatch.setattr(nvml_api, "visible_now", lambda: [object()])  # one GPU
    with pytest.raises(UsageError, match="asks for CUDA device 3"):
        quick_check({"device": 3}, {"device": 3})
    monkeypatch.setattr(nvml_api, "visible_now", lambda: [])  # no NVML: the count is not known, training decides
    assert quick_check({"device": 3}, {"device": 3})["env.device_kind"] == "cuda"


def test_weights_that_are_not_here_are_named(tmp_path):
    off = {"YOLO_OFFLINE": "1"}
    absent = probe({"model": str(tmp_path / "mine.pt")}, environ=off)
    f = next(f for f in absent.findings if f.id == "EN113")
    assert f.severity.name == "error" and "nothing can be downloaded" in f.message
    assert next(f for f in probe({"model": "yolo11n.pt"}, environ=off).findings
                if f.id == "EN113").severity.name == "warning"  # a release asset, offline
    assert next(f for f in probe({"model": "yolo11n.pt"}, environ={}, online=True).findings
                if f.id == "EN113").severity.name == "info"
    (tmp_path / "mine.pt").write_bytes(b"weights")
    for model in (str(tmp_path / "mine.pt"), "yolo11n.yaml", "https://example.com/w.pt"):
        assert "EN113" not in ids(probe({"model": model}, environ=off))
