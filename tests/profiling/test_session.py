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


class Iterating(Loader):
    def __init__(self, workers):
        super().__init__()
        self.iterator = type("It", (), {"_workers": workers})()


def _sleep():
    import time
    time.sleep(60)


def _exit3():
    raise SystemExit(3)


def dead_worker(how):
    """A real child process ended by ``how`` ("kill": SIGKILL, "exit": code 3), as a loader worker would be."""
    import multiprocessing
    import signal

    p = multiprocessing.get_context("fork").Process(target=_sleep if how == "kill" else _exit3)
    p.start()
    if how == "kill":
        import os
        os.kill(p.pid, signal.SIGKILL)
    p.join(10)
    return p


def ended_reason(run):
    return [e for e in read_events(run / "events.jsonl") if e["type"] == "run_end"][-1]["reason"]


def test_a_crash_after_a_killed_loader_worker_names_the_worker_whatever_error_came_first(tmp_path):
    worker = dead_worker("kill")
    s, _ = started(tmp_path, "killed", Iterating([worker]))
    s.end("incomplete", "crashed: ConnectionResetError: [Errno 104] Connection reset by peer")
    reason = ended_reason(s.run)
    assert reason.startswith(f"crashed: DataLoader worker (pid {worker.pid}) of the train_loader was killed by "
                             "signal SIGKILL")
    assert "out-of-memory killer" in reason and reason.endswith("ConnectionResetError: [Errno 104] Connection "
                                                                "reset by peer")


def test_a_worker_that_exited_with_an_error_is_named_and_healthy_workers_change_nothing(tmp_path):
    worker = dead_worker("exit")
    s, _ = started(tmp_path, "exited", Iterating([worker]))
    s.end("incomplete", "crashed: BrokenPipeError: [Errno 32] Broken pipe")
    assert f"DataLoader worker (pid {worker.pid}) of the train_loader exited with code 3" in ended_reason(s.run)
    s2, _ = started(tmp_path, "healthy", Iterating([type("W", (), {"pid": 1, "exitcode": None})()]))
    s2.end("incomplete", "crashed: ValueError: bad label")
    assert ended_reason(s2.run) == "crashed: ValueError: bad label"


def test_an_interruption_is_not_blamed_on_a_worker_the_signal_also_reached(tmp_path):
    s, _ = started(tmp_path, "interrupted-w", Iterating([dead_worker("kill")]))
    s.end("incomplete", "interrupted")
    assert ended_reason(s.run) == "interrupted"
