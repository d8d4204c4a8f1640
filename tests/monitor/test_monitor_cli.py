"""`yolodoctor monitor` and `profile --monitor` on the command line (the TUI itself is replaced where it would run)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from yolodoctor import cli


def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    return e.value.code, capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["monitor", "/no/such/run"], "run directory not found: /no/such/run"),
    (["monitor", "runs/x", "batch=8"], "either one RUN_DIR or KEY=VALUE"),
    (["monitor", "runs/x", "--", "python", "train.py"], "either RUN_DIR or `-- COMMAND`"),
    (["monitor", "--refresh", "0", "batch=8"], "--refresh"),
    (["monitor", "--refresh", "nan", "batch=8"], "not a finite number"),
    (["monitor", "runs/x", "--steps", "5"], "--steps applies to a training the monitor starts"),
    (["monitor", "--out", "runs/x"], "--out applies to a training the monitor starts"),
    (["profile", "--monitor", "--json"], "--monitor and --json exclude each other"),
])
def test_usage_errors_are_one_line_and_exit_2(argv, message, capsys):
    code, err = run_cli(argv, capsys)
    assert code == 2 and message in err and err.count("\n") == 1


def test_an_unknown_train_argument_is_refused_before_anything_starts(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, err = run_cli(["monitor", "bacth=8"], capsys)
    assert code == 2 and "unknown train argument 'bacth'" in err
    assert not (tmp_path / "runs").exists()  # no run directory, no training


def test_profile_monitor_passes_its_options_to_the_launched_profile(monkeypatch, tmp_path):
    import yolodoctor.commands.monitor as command

    seen = {}
    monkeypatch.setattr(command, "run", lambda words, cmd, **kw: seen.update(words=words, cmd=cmd, **kw) or 0)
    with pytest.raises(SystemExit) as e:
        cli.main(["profile", "--monitor", "--steps", "40", "--no-trace", "--out", str(tmp_path / "r"), "batch=8"])
    assert e.value.code == 0
    assert seen["words"] == ["batch=8"] and seen["cmd"] == [] and seen["out"] == tmp_path / "r"
    assert seen["profile_options"] == ["--steps", "40", "--no-trace", "--sample-hz", "5.0", "--loader-seconds", "8.0",
                                       "--fail-on", "error"]
    with pytest.raises(SystemExit):
        cli.main(["monitor", "--refresh", "2", "--", "python", "train.py"])
    assert seen["words"] == [] and seen["cmd"] == ["python", "train.py"] and seen["refresh"] == 2.0


def test_importing_the_cli_does_not_import_textual():
    code = "import sys, yolodoctor, yolodoctor.cli; print(any(m.startswith('textual') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
