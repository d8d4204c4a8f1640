"""bench/pyspy_probe.py: py-spy's raw output -> where the training thread's wall time goes."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import pyspy_probe as pp

SYNC = "BaseTrainer._do_train (/x/site-packages/ultralytics/engine/trainer.py:420);Tensor.item (/y/torch/_tensor.py:9)"
FWD = "BaseTrainer._do_train (/x/site-packages/ultralytics/engine/trainer.py:400);conv (/y/torch/nn/conv.py:5)"
PIN = "_pin_memory_loop (/y/torch/utils/data/_utils/pin_memory.py:50)"


def raw(tmp_path, name, lines):
    p = tmp_path / f"{name}.txt"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_the_training_thread_waits_at_a_sync_while_the_pin_thread_holds_the_gil(tmp_path):
    paths = {  # 100 samples of the main thread (tid 7): 60 at .item(), 40 in the forward; pin thread (tid 9)
        "all": raw(tmp_path, "all", [f"thread (7): MainThread;{SYNC} 60", f"thread (7): MainThread;{FWD} 40",
                                     f"thread (9): Thread-3 (_pin_memory_loop);{PIN} 100"]),
        "gil": raw(tmp_path, "gil", [f"thread (7): MainThread;{FWD} 30", f"thread (9): Thread-3 (_pin);{PIN} 50"]),
        "cpu": raw(tmp_path, "cpu", [f"thread (7): MainThread;{FWD} 38", f"thread (7): MainThread;{SYNC} 6",
                                     f"thread (9): Thread-3 (_pin);{PIN} 55"]),
    }
    s = pp.summarise(paths, tid=7)
    assert s["samples"] == 100 and s["on_cpu"] == 0.44 and s["gil"] == 0.3
    top = s["leaves"][0]
    assert top == {"where": "Tensor.item (torch/_tensor.py:9)", "share": 0.6, "on_cpu": 0.1, "gil": 0.0}
    assert s["leaves"][1]["where"] == "conv (torch/nn/conv.py:5)" and s["leaves"][1]["gil"] == 0.75
    assert s["other_threads"] == [{"thread": "Thread-3 (_pin_memory_loop)", "on_cpu": 0.55, "gil": 0.5,
                                   "top": "_pin_memory_loop (torch/utils/data/_utils/pin_memory.py:50)"}]


def test_no_samples_of_the_training_thread_is_said_not_invented(tmp_path):
    paths = {"all": raw(tmp_path, "all", [f"thread (9): Thread-3;{PIN} 10", "garbage line"])}
    assert pp.summarise(paths, tid=7) == {"error": "no samples of the training thread"}
    assert pp.parse(paths["all"])[9]["samples"] == 10


def test_a_thread_without_a_name_is_still_counted(tmp_path):
    p = raw(tmp_path, "all", [f"thread (7): MainThread;{SYNC} 5", f"thread (8);{PIN} 3", "thread (9) 2"])
    got = pp.parse(p)
    assert got[8]["name"] == "thread 8" and got[8]["samples"] == 3 and got[9]["leaves"] == {"(no Python frame)": 2}


def test_the_training_pid_is_the_one_its_sampler_recorded(tmp_path):
    assert pp.training_pid(tmp_path) is None  # no samples yet
    (tmp_path / "samples.jsonl").write_text('{"type": "sampler_start", "pid": 4321, "tid": 4321}\n{"type": "sample"}\n')
    assert pp.training_pid(tmp_path) == 4321
    (tmp_path / "samples.jsonl").write_text('{"type": "sample", "pid": 1}\n')
    assert pp.training_pid(tmp_path) is None
