"""The sampler as its own process: :func:`start_sampler` / :func:`stop_sampler` for the runner, and the command line
it runs::

    python -m yolodoctor.profiling.sampler_process --pid PID --out FILE.jsonl [--hz 5] [--gpu-uuid UUID]
                                                   [--roles FILE.json] [--tid TID] [--no-gpu] [--duty ON,OFF]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from yolodoctor.api.nvml import Nvml
from yolodoctor.profiling.sampler import Sampler


def start_sampler(pid: int, out: str | os.PathLike[str], hz: float = 5, gpu_uuid: str | None = None,
                  roles: str | os.PathLike[str] | None = None, tid: int | None = None, *, gpu: bool = True,
                  ready_timeout: float | None = 10.0, python: str | None = None,
                  env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start the sampler as its own process (in a new session, so a Ctrl-C aimed at the training does not cut the
    record short; it stops by itself when ``pid`` exits). ``out`` is replaced. With ``ready_timeout``, wait until the
    ``sampler_start`` record is written (or the sampler died, or the time is up) before returning."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        out.unlink()
    cmd = [python or sys.executable, "-m", "yolodoctor.profiling.sampler_process", "--pid", str(pid),
           "--out", str(out), "--hz", str(hz)]
    if gpu_uuid:
        cmd += ["--gpu-uuid", gpu_uuid]
    if roles:
        cmd += ["--roles", os.fspath(roles)]
    if tid is not None:
        cmd += ["--tid", str(tid)]
    if not gpu:
        cmd += ["--no-gpu"]
    environ = dict(os.environ if env is None else env)
    pkg_root = str(Path(__file__).resolve().parents[2])  # importable even when yolodoctor is not installed
    paths = [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if pkg_root not in paths:
        environ["PYTHONPATH"] = os.pathsep.join([pkg_root, *paths])
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=environ,
                            start_new_session=True, close_fds=True)
    if ready_timeout:
        deadline = time.monotonic() + ready_timeout
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with open(out, "rb") as f:
                    if b"\n" in f.readline():
                        break
            except FileNotFoundError:
                pass
            time.sleep(0.02)
    return proc


def stop_sampler(proc: subprocess.Popen, timeout: float = 5.0) -> int | None:
    """SIGTERM, then wait for the sampler to finish its tick and write ``sampler_end``; SIGKILL if it hangs."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m yolodoctor.profiling.sampler_process",
                                description="Sample CPU, threads, workers, memory, disk and GPU beside a process.")
    p.add_argument("--pid", type=int, required=True, help="the training process")
    p.add_argument("--out", required=True, help="JSONL file to write (replaced)")
    p.add_argument("--hz", type=float, default=5.0, help="samples per second (default 5)")
    p.add_argument("--gpu-uuid", default=None, help="torch's device UUID (NVML's 'GPU-' prefix optional)")
    p.add_argument("--roles", default=None, help='JSON file {"<pid>": "train_worker"|"val_worker"|...}')
    p.add_argument("--tid", type=int, default=None, help="native id of the training thread")
    p.add_argument("--no-gpu", action="store_true", help="do not query NVML (GPU telemetry off)")
    p.add_argument("--duty", default=None, metavar="ON,OFF", help="sample ON seconds, pause OFF seconds, repeat")
    return p


def parse_duty(text: str | None) -> tuple[float, float] | None:
    if not text:
        return None
    try:
        on, off = (float(x) for x in text.split(","))
    except ValueError:
        raise ValueError(f"--duty must be ON,OFF seconds, got {text!r}") from None
    if not (on > 0 and off > 0):
        raise ValueError(f"--duty must be two positive numbers of seconds, got {text!r}")
    return on, off


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not args.hz > 0:
        print("sampler: --hz must be positive", file=sys.stderr)
        return 2
    try:
        duty = parse_duty(args.duty)
    except ValueError as e:
        print(f"sampler: {e}", file=sys.stderr)
        return 2
    stopping: list[str] = []
    r_fd, w_fd = os.pipe()
    os.set_blocking(w_fd, False)
    signal.set_wakeup_fd(w_fd)

    def on_signal(signum: int, _frame: Any) -> None:
        stopping.append("interrupted" if signum == signal.SIGINT else "stopped")

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_signal)

    def wait(seconds: float) -> None:  # returns at once when a signal arrives
        ready, _, _ = select.select([r_fd], [], [], seconds)
        if ready:
            os.read(r_fd, 512)

    out_path = Path(args.out)
    try:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        with open(out_path, "w", encoding="utf-8") as out:
            sampler = Sampler(args.pid, tid=args.tid, roles_path=args.roles, gpu_uuid=args.gpu_uuid,
                              nvml=Nvml(None, "GPU telemetry turned off (--no-gpu)") if args.no_gpu else None)
            try:
                sampler.run(out, args.hz, stop=lambda: stopping[0] if stopping else None, wait=wait, duty=duty)
            finally:
                sampler.nvml.close()
    except OSError as e:  # cannot write the file (disk full, directory gone): nothing more to do
        print(f"sampler: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
