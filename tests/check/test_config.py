from yolodoctor.check.config import probe_config

CUDA = {"env.device_kind": "cuda"}
CPU = {"env.device_kind": "cpu"}
DEFAULTS = {"batch": 16, "nbs": 64, "amp": True, "compile": False, "deterministic": True}


def ids(res):
    return sorted(f.id for f in res.findings)


def run(user, facts=CUDA, flags=None):
    return probe_config(user, {**DEFAULTS, **user}, facts, flags)


def test_defaults_on_gpu_only_deterministic_cost():
    res = run({})
    assert ids(res) == ["CF105"]
    assert res.facts["config.accumulate"] == 4 and res.facts["config.effective_batch"] == 64


def test_autobatch_with_cudnn_benchmark():
    assert "CF101" in ids(run({"batch": -1}, flags={"cudnn.benchmark": True}))
    assert "CF101" not in ids(run({"batch": -1}, flags={"cudnn.benchmark": False}))


def test_amp_and_compile_on_cpu():
    assert ids(run({"amp": True, "compile": "reduce-overhead"}, CPU)) == ["CF102", "CF103"]
    assert ids(run({}, CPU)) == []  # amp=True by default is not the user's doing


def test_batch_above_nbs_changes_training():
    res = run({"batch": 128})
    f = next(f for f in res.findings if f.id == "CF104")
    assert f.fix.args == {"batch": 64}
    assert res.facts["config.accumulate"] == 1 and res.facts["config.effective_batch"] == 128
