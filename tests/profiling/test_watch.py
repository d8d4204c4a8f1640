"""What a command shows while a training runs: progress from the event stream, the training's output through a pipe
(kept whole in output.log, shown only where asked), and the profiler library's own log silenced."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from yolodoctor.profiling.watch import KINETO_QUIET, OutputPump, RunProgress, child_env, current, watching

ROOT = Path(__file__).resolve().parents[2]


def test_progress_reads_the_event_stream_as_it_grows(tmp_path):
    events = tmp_path / "events.jsonl"
    p = RunProgress(tmp_path)
    assert p.poll().describe() == "starting the training process"  # no stream yet
    with open(events, "w") as fh:
        fh.write(json.dumps({"type": "run_start", "t": 0.0}) + "\n")
        fh.write(json.dumps({"type": "imported", "t": 1.0}) + "\n")
        fh.flush()
        assert p.poll().describe() == "building the model"
        fh.write(json.dumps({"type": "train_begin", "t": 2.0}) + "\n")
        fh.write(json.dumps({"type": "steps_limit", "steps": 35, "t": 2.5}) + "\n")
        fh.write('{"type": "step", "t1": 3.0, "ima')  # a line still being written is not read
        fh.flush()
        assert p.poll().describe().startswith("Ultralytics' setup") and p.limit == 35 and p.step == 0
        fh.write('ges": 4}\n')
        for i in range(1, 6):
            fh.write(json.dumps({"type": "step", "t1": 3.0 + i, "images": 4}) + "\n")
        fh.flush()
    assert p.poll().describe() == "step 6/35, 4.0 images/s"  # 20 images after the first step, in 5 s
    with open(events, "a") as fh:
        fh.write("not json\n" + json.dumps({"type": "loader_capacity_start"}) + "\n")
    assert p.poll().describe() == "timing the loader alone (after 6 steps)"


def test_a_bound_given_as_steps_is_read_from_the_spec(tmp_path):
    (tmp_path / "spec.json").write_text(json.dumps({"steps": 12}))
    (tmp_path / "events.jsonl").write_text(json.dumps({"type": "step", "t1": 1.0, "images": 4}) + "\n")
    assert RunProgress(tmp_path).poll().describe() == "step 1/12"
    (tmp_path / "spec.json").write_text(json.dumps({"steps": "auto"}))
    assert RunProgress(tmp_path).poll().describe() == "step 1"


def test_the_pump_keeps_everything_and_shows_lines_with_a_progress_bars_last_frame(tmp_path):
    r, w = os.pipe()
    shown = []

    def echo(line):
        shown.append(line)
        if line == "boom":
            raise RuntimeError("a broken console")  # never stops the draining

    pump = OutputPump(os.fdopen(r, "rb"), tmp_path / "output.log", echo).start()
    data = b"first\nCaching 10%\r\x1b[KCaching 50%\r\x1b[KCaching 100%\nboom\nlast without newline"
    os.write(w, data)
    os.close(w)
    pump.join(5)
    assert not pump.thread.is_alive()
    assert (tmp_path / "output.log").read_bytes() == data
    assert shown == ["first", "Caching 100%", "boom", "last without newline"]


def test_the_pump_without_an_echo_shows_nothing_and_survives_an_unwritable_log(tmp_path):
    r, w = os.pipe()
    pump = OutputPump(os.fdopen(r, "rb"), tmp_path / "no-such-folder" / "output.log", None).start()
    os.write(w, b"x" * 200_000)  # more than a pipe holds: drained all the same
    os.close(w)
    pump.join(5)
    assert not pump.thread.is_alive()


def test_watching_sets_what_trainings_launched_inside_report_to():
    assert current().echo is None and current().progress is None and not current().debug
    with watching(debug=True, echo=print):
        assert current().debug and current().echo is print
        with watching(echo=None):
            assert current().debug and current().echo is None
    assert not current().debug


def test_the_training_environment_silences_the_profiler_log_unless_debug_or_set():
    assert child_env({}, debug=False) == KINETO_QUIET
    assert child_env({}, debug=True) == {}
    assert child_env({"KINETO_LOG_LEVEL": "0"}, debug=False) == {"KINETO_LOG_LEVEL": "0"}  # the user's own wins


@pytest.mark.slow  # runs torch.profiler in a child process
def test_the_trace_window_silences_kineto_after_ultralytics_set_its_level():
    # Ultralytics sets KINETO_LOG_LEVEL=5 when imported, which still prints profiler_start/stop (USDT) lines on the
    # CPU; the trace window raises it before the profiler starts, unless --debug asked for the profiler's log
    code = textwrap.dedent("""
        import sys, tempfile, torch
        import ultralytics.utils  # sets KINETO_LOG_LEVEL=5
        from yolodoctor.profiling.trace import TraceWindow
        w = TraceWindow(tempfile.mkdtemp(), start=0, active=1, quiet=sys.argv[1] == "quiet")
        w.before_step(0)
        torch.randn(64, 64) @ torch.randn(64, 64)
        w.after_step(0)
        print("traced", w.done)
    """)
    for mode, shown in (("quiet", False), ("debug", True)):
        p = subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True, timeout=120, cwd=ROOT,
                           env={**os.environ, "YOLO_OFFLINE": "1"})
        assert p.returncode == 0 and "traced True" in p.stdout, p.stderr[-2000:]
        assert ("profiler_start" in p.stderr) is shown, p.stderr[-2000:]
