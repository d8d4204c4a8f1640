"""The child's session: how a run ends (the train loader is shut down after an interrupted or failed run)."""

import json

from yolodoctor.profiling import session
from yolodoctor.record.events import read_events


class Loader:
    def __init__(self, fail=False):
        self.closed, self.fail = 0, fail

    def close(self):
        self.closed += 1
        if self.fail:
            raise RuntimeError("worker pipe already gone")


class Trainer:
    def __init__(self, loader):
        self.train_loader = loader


def started(tmp_path, name, loader):
    run = tmp_path / name
    run.mkdir()
    (run / "spec.json").write_text(json.dumps({"args": {}, "steps": 3, "trace": False}))
    s = session.Session(run)
    t = Trainer(loader)
    s.recorder.on_pretrain_routine_start(t)
    return s, t


def test_an_interrupted_run_closes_its_train_loader_and_a_complete_one_leaves_it(tmp_path):
    s, t = started(tmp_path, "interrupted", Loader())
    s.end("incomplete", "interrupted")
    assert t.train_loader.closed == 1
    s2, t2 = started(tmp_path, "complete", Loader())
    s2.end("complete", None)
    assert t2.train_loader.closed == 0  # Ultralytics closes its own loaders after a normal end


def test_a_failing_close_is_recorded_and_the_run_still_ends(tmp_path):
    s, _ = started(tmp_path, "failing", Loader(fail=True))
    s.end("incomplete", "crashed: RuntimeError")
    types = [e["type"] for e in read_events(s.run / "events.jsonl")]
    assert "loader_close_error" in types and types[-1] == "run_end"


def test_no_trainer_yet_is_fine(tmp_path):
    run = tmp_path / "early"
    run.mkdir()
    (run / "spec.json").write_text(json.dumps({"args": {}, "steps": 3, "trace": False}))
    s = session.Session(run)
    s.end("incomplete", "crashed before training")
    assert [e["type"] for e in read_events(run / "events.jsonl")][-1] == "run_end"


def test_a_crash_reason_is_saved_without_terminal_colours():
    from ultralytics.utils import colorstr

    from yolodoctor.profiling.session import classify_error

    reason, code = classify_error(FileNotFoundError(colorstr("red", "bold", "Dataset 'x.yaml' images not found")))
    assert (reason, code) == ("crashed: FileNotFoundError: Dataset 'x.yaml' images not found", 1)
    assert classify_error(RuntimeError("CUDA out of memory"))[0].startswith("out-of-memory: RuntimeError")
