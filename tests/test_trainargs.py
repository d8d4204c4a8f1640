import pytest

from yolodoctor.errors import UsageError
from yolodoctor.trainargs import DEFAULT_MODEL, effective, parse_kv


def test_values_parsed_like_yolo_train():
    args = parse_kv(["batch=32", "amp=BF16", "compile=reduce-overhead", "cache=ram", "workers=4", "device=None",
                     "imgsz=640", "lr0=1e-3", "deterministic=False"])
    assert args == {"batch": 32, "amp": "bf16", "compile": "reduce-overhead", "cache": "ram", "workers": 4,
                    "device": None, "imgsz": 640, "lr0": 0.001, "deterministic": False}


@pytest.mark.parametrize("word,needle", [
    ("bach=3", "did you mean batch"), ("batch=abc", "batch"), ("amp=fp8", "amp"), ("x", "KEY=VALUE"),
    ("=3", "KEY=VALUE"), ("lr0=fast", "lr0"), ("epochs=1.5", "epochs"), ("deterministic=maybe", "deterministic"),
    ("imgsz=abc", "imgsz=abc"), ("imgsz=640.5", "imgsz"),
])
def test_bad_arguments_are_usage_errors(word, needle):
    with pytest.raises(UsageError, match=needle):
        parse_kv([word])


def test_imgsz_as_the_trainer_takes_it():
    # a pair and a size off the stride pass (the trainer rounds it up); parse keeps what the user wrote
    assert parse_kv(["imgsz=640,480"])["imgsz"] == (640, 480)
    assert parse_kv(["imgsz=641"])["imgsz"] == 641


def test_duplicate_key():
    with pytest.raises(UsageError, match="twice"):
        parse_kv(["batch=8", "batch=16"])


def test_effective_fills_ultralytics_defaults_and_offline_model():
    args = effective({"batch": 8})
    assert args["batch"] == 8 and args["workers"] == 8 and args["nbs"] == 64 and args["model"] == DEFAULT_MODEL


def test_a_classification_training_trains_at_224_unless_its_model_names_another_task():
    from yolodoctor.trainargs import is_classify

    assert is_classify({"model": "yolo11n-cls.yaml"}) and is_classify({"task": "classify"})
    assert not is_classify({"model": "yolo11n-seg.yaml", "task": "classify"})  # the model's task wins
    assert not is_classify({"model": "yolo11n.yaml"})
