"""`yolodoctor monitor [RUN_DIR] [--refresh S] [KEY=VALUE ... | -- COMMAND ...]` and `profile --monitor`.

With RUN_DIR it watches that run directory; with KEY=VALUE or a command it launches the training through
`yolodoctor profile` (launch.py) and watches its run directory; with neither it shows the machine alone.
Quitting while a launched training still runs stops it the way Ctrl-C stops `profile` (the record is saved, marked
interrupted); the exit code is then the profile's own.
"""

from __future__ import annotations

import sys
from pathlib import Path

from yolodoctor.errors import InputError, UsageError


def split_target(words: list[str]) -> tuple[Path | None, list[str]]:
    """RUN_DIR (one word without '=') or KEY=VALUE words."""
    plain = [w for w in words if "=" not in w]
    if not plain:
        return None, list(words)
    if len(words) > 1:
        raise UsageError("give either one RUN_DIR or KEY=VALUE train arguments, not both")
    return Path(plain[0]), []


def run(words: list[str], command: list[str], *, refresh: float, steps: int | None = None, out: Path | None = None,
        profile_options: list[str] | None = None) -> int:
    from yolodoctor.diagnosis.rules import load_rules
    from yolodoctor.monitor.source import MachineSource, RunDirSource, Source

    run_dir, train_args = split_target(words)
    if run_dir is not None and command:
        raise UsageError("give either RUN_DIR or `-- COMMAND`, not both")
    if not (train_args or command or profile_options is not None) and (steps or out is not None):
        raise UsageError(f"{'--steps' if steps else '--out'} applies to a training the monitor starts (KEY=VALUE or "
                         "-- COMMAND), not to watching a run or the machine")
    rules = load_rules()
    launch = None
    if train_args or command or profile_options is not None:
        from yolodoctor.monitor.launch import Launch, fresh_run_dir

        if train_args:
            from yolodoctor import trainargs

            trainargs.parse_kv(train_args)  # an unknown key is a usage error here, before the screen is taken
        options = profile_options if profile_options is not None else (
            ["--steps", str(steps)] if steps else ["--all"])
        if out is not None and Path(out).exists():
            raise UsageError(f"--out {out} already exists; yolodoctor never overwrites it")
        run_dir = fresh_run_dir(out)
        launch = Launch(run_dir, train_args, command, options).start()
        source: Source = RunDirSource(run_dir, rules=rules, launch=launch)
    elif run_dir is not None:
        if not run_dir.is_dir():
            from yolodoctor.record.rundir import not_a_run_dir

            raise InputError(not_a_run_dir(run_dir))
        source = RunDirSource(run_dir, rules=rules)
    else:
        source = MachineSource(rules=rules)

    from yolodoctor.monitor.app import MonitorApp

    app = MonitorApp(source, refresh=refresh)
    try:
        app.run()
    finally:
        snap = app.snapshot
        rc = launch.stop(finishing=30.0 if snap and snap.ended else 0.0) if launch is not None else None
    if launch is not None:
        from yolodoctor.monitor.source import final_diagnosis

        ended = final_diagnosis(launch.run_dir, rules)
        how = ended[0].text() if ended else f"profile exit code {rc}"
        sys.stderr.write(f"yolodoctor monitor: {run_dir} ({how}); profile log: {launch.log_path}\n")
        return rc if rc is not None else 2
    if snap is not None and snap.ended:
        sys.stderr.write(f"yolodoctor monitor: {run_dir} ({snap.ended.text()})\n")
    return 0
