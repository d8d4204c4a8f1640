"""Start a training for the monitor: `python -m yolodoctor profile [OPTIONS] --out DIR [KEY=VALUE ... | -- COMMAND]`
in a subprocess, so that it runs exactly as `yolodoctor profile` would, with its own sampler and run record; the
monitor tails DIR. Its output goes to DIR.log beside the run directory (the terminal belongs to the TUI).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from yolodoctor.record.rundir import new_run_dir


def fresh_run_dir(out: str | Path | None) -> Path:
    """``out`` as given (profile refuses an existing one), else a new name under runs/yolodoctor/ that profile
    creates itself."""
    if out is not None:
        return Path(out)
    run = new_run_dir(name="profile")  # reserves the next free name ...
    run.rmdir()  # ... which `profile --out` creates again
    return run


class Launch:
    def __init__(self, run_dir: Path, train_args: list[str], command: list[str], profile_options: list[str]) -> None:
        self.run_dir = Path(run_dir)
        self.log_path = self.run_dir.with_name(self.run_dir.name + ".log")
        self.argv = [sys.executable, "-m", "yolodoctor", "profile", *profile_options, "--out", str(self.run_dir),
                     *train_args] + (["--", *command] if command else [])
        self.proc: subprocess.Popen | None = None

    def start(self) -> Launch:
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])  # this yolodoctor, installed or not
        env["PYTHONPATH"] = os.pathsep.join([root, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         env=env, start_new_session=True)
        return self

    def poll(self) -> int | None:
        return self.proc.poll() if self.proc is not None else None

    def last_line(self) -> str:
        """The last line the profile printed (its one-line error, when it failed)."""
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(max(0, fh.seek(0, os.SEEK_END) - 4096))
                lines = [x for x in fh.read().decode(errors="replace").splitlines() if x.strip()]
        except OSError:
            return ""
        return lines[-1].strip() if lines else ""

    def stop(self, timeout: float = 60.0, finishing: float = 0.0) -> int | None:
        """Wait up to ``finishing`` seconds for the profile to end by itself (its record written, it still prints
        the diagnosis), then Ctrl-C it (it saves what it has, marked interrupted); SIGKILL if that takes too long."""
        if self.proc is None:
            return None
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(finishing)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode
