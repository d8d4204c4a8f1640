"""`yolodoctor profile`: run the training in a child process, sample it from a side process, write the run record.

The parent never imports torch: it creates the run directory, starts the training child and the sampler, forwards
Ctrl-C and SIGTERM to the child, and finally writes profile.json from the child's event stream, marking the profile
incomplete (with the reason) when the training crashed, ran out of memory, produced a non-finite loss or was stopped.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yolodoctor.profiling import hostprobe
from yolodoctor.record.events import read_events
from yolodoctor.record.profile import EVENTS, LAUNCHER_EVENTS, PROFILE, SAMPLES, SPEC, Profile, now
from yolodoctor.record.rederive import resummarise, split_phases
from yolodoctor.record.rundir import (
    exclusive_dir,
    low_disk,
    new_run_dir,
    release_space,
    reserve_space,
    write_json_atomic,
)
from yolodoctor.record.summary import settings_of
from yolodoctor.ulenv import users_env

if TYPE_CHECKING:
    from yolodoctor.profiling.watch import RunProgress


def make_run_dir(out: str | Path | None, name: str = "profile") -> Path:
    from yolodoctor.errors import OutputError, UsageError

    try:
        return new_run_dir(name=name) if out is None else exclusive_dir(out)
    except FileExistsError:
        if out is None:
            raise
        p = Path(out)
        if p.exists() or p.is_symlink():
            what = "a directory" if p.is_dir() else "a file"
            raise UsageError(f"--out {out} already exists ({what}); yolodoctor never overwrites it") from None
        blocker = next((a for a in p.parents if a.exists() and not a.is_dir()), p.parent)
        raise UsageError(f"--out {out}: {blocker} is a file, not a folder") from None
    except OSError as e:
        raise OutputError(f"cannot create the run directory {out or 'under runs/yolodoctor'}: {e.strerror or e}") \
            from None


def gpu_uuid_for(args: dict[str, Any]) -> str | None:
    """The NVML UUID of the GPU the run will use (torch's first requested ordinal under CUDA_VISIBLE_DEVICES)."""
    from yolodoctor.api.nvml import visible_now
    from yolodoctor.devices import parse_device

    gpus = visible_now()
    dev = parse_device(args.get("device"), bool(gpus))
    if dev.kind != "cuda" or not gpus:
        return None
    i = dev.indices[0] if dev.indices else 0
    return gpus[i].uuid if i < len(gpus) else None


@dataclass(frozen=True)
class Measurement:
    """How a profile measures its training: ``steps`` (an int bounds it, "auto" the default bound, None the whole
    training), the sampler's rate ``hz`` (0: off) and whether it queries NVML, the profiler ``trace``, the loader's own
    timing after the steps (``loader_seconds``, 0: skipped), and ``whole_if_short`` (see run_profile)."""
    steps: int | str | None = "auto"
    hz: float = 5.0
    trace: bool = True
    loader_seconds: float = 8.0
    gpu_telemetry: bool = True
    whole_if_short: bool = False


def run_profile(args: dict[str, Any] | None = None, *, command: list[str] | None = None,
                measure: Measurement = Measurement(), out: str | Path | None = None,
                check_facts: dict[str, Any] | None = None, env_extra: dict[str, str] | None = None,
                torch_flags: dict[str, Any] | None = None, overrides: dict[str, Any] | None = None,
                log: Callable[[str], None] = lambda m: None) -> tuple[Path, Profile]:
    """Profile ``model.train(**args)`` (args mode) or an unmodified program (``command``, script mode), measured as
    ``measure`` says.

    ``overrides``: train arguments that win over the program's own (a fix plan or a trial). In args mode they are
    merged into ``args``; in script mode the injected hook merges them into every Ultralytics trainer the program
    builds (inject/__init__.py), so the program's file is never edited. ``whole_if_short`` (`profile`'s own runs, not
    fix's trials, which must reach a window past a short training's end): with ``steps="auto"``, a training no longer
    than a bounded profile is measured whole (profiling/session.py)."""
    steps, hz, trace, loader_seconds = measure.steps, measure.hz, measure.trace, measure.loader_seconds
    gpu_telemetry, whole_if_short = measure.gpu_telemetry, measure.whole_if_short
    if overrides and not command:
        args = {**(args or {}), **overrides}
    from yolodoctor.devices import ddp_requested
    from yolodoctor.profiling.sampler_process import start_sampler, stop_sampler
    from yolodoctor.profiling.session import ENV_RUN_DIR
    from yolodoctor.profiling.watch import OUTPUT, OutputPump, RunProgress, child_env, current

    watch = current()
    mode = "script" if command else "args"
    # several GPUs in args mode: Ultralytics launches the ranks itself and pickles the trainer's callbacks into them,
    # so the ranks are followed as in script mode (module-level hooks through the injected sitecustomize)
    ddp = mode == "args" and ddp_requested((args or {}).get("device"))
    run = make_run_dir(out)
    profile = Profile(mode=mode, args=args or {}, command=command,
                      steps_limit=steps if isinstance(steps, int) else None)
    profile.files["spec"] = SPEC
    profile.files["output"] = OUTPUT
    if check_facts:
        profile.check_facts = check_facts
    try:
        write_json_atomic(run / SPEC, {"mode": mode, "args": args or {}, "command": command, "steps": steps,
                                       "env": env_extra or {}, "torch_flags": torch_flags or {},
                                       "overrides": (overrides or {}) if command else {},
                                       "trace": trace, "profiler_log": watch.debug,
                                       "loader_capacity": loader_seconds > 0, "ddp": ddp,
                                       "loader_seconds": loader_seconds, "whole_if_short": whole_if_short})
        profile.save(run)
    except OSError as e:
        from yolodoctor.errors import OutputError

        raise OutputError(f"cannot write the run directory {run}: {e.strerror or e}") from None
    reserve_space(run)  # room for the final record, should the disk fill during the run
    log(f"run directory: {run}")

    env = dict(os.environ)
    pkg_root = str(Path(__file__).resolve().parents[2])
    extra = [pkg_root] if mode == "args" and not ddp else [str(Path(__file__).resolve().parent / "inject"), pkg_root]
    env["PYTHONPATH"] = os.pathsep.join([*extra, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    env[ENV_RUN_DIR] = str(run.resolve())
    env.update({k: str(v) for k, v in (env_extra or {}).items()})
    env = users_env(child_env(env, watch.debug))  # Ultralytics' log as the user has it, into output.log
    argv = list(command) if command else [sys.executable, "-m", "yolodoctor.profiling.child", str(run)]
    profile.host_probe = {"before": hostprobe.record()}
    spawned = time.monotonic()
    try:
        # its output through a pipe: kept whole in output.log, shown only where the command asks (watch.py)
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL if mode == "args" else None,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                 start_new_session=True)  # a terminal's Ctrl-C reaches it once, through forward()
    except OSError as e:
        from yolodoctor.errors import InputError

        profile.status, profile.reason, profile.finished = "incomplete", f"could not start: {e}", now()
        profile.save(run)
        raise InputError(f"cannot run {argv[0]!r}: {e.strerror or e}") from None
    out = getattr(child, "stdout", None)
    pump = OutputPump(out, run / OUTPUT, watch.echo).start() if out is not None else None
    progress = RunProgress(run) if watch.progress is not None else None
    sampler = (start_sampler(child.pid, run / SAMPLES, hz=hz, gpu_uuid=gpu_uuid_for(args or {}) if gpu_telemetry
                             else None, roles=run / "roles.json", tid=child.pid, gpu=gpu_telemetry)
               if hz > 0 else None)
    interrupted: list[int] = []

    def forward(signum: int, frame: Any) -> None:
        interrupted.append(signum)
        if child.poll() is None:
            child.send_signal(signum)

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        _wait(child, progress, watch.progress, forward)
        ended = time.monotonic()
        if pump is not None:
            pump.join()
        if not interrupted:  # still under forward(): a Ctrl-C now cannot skip the final record
            profile.host_probe["after"] = hostprobe.record()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if sampler is not None:
            stop_sampler(sampler)
    finalise(run, profile, child.returncode, interrupted, span=(spawned, ended))
    if profile.reason and "disk full" in profile.reason:
        log(f"the disk holding {run} filled up during the run: the record is marked incomplete")
    return run, profile


def _wait(child: subprocess.Popen, progress: RunProgress | None, show: Callable[[RunProgress], None] | None,
          forward: Callable[[int, Any], None]) -> None:
    """Wait for the training process, showing its ``progress`` every quarter second where a command asked for it
    (``show``); a second Ctrl-C while waiting is forwarded like the first."""
    while True:
        try:
            child.wait(0.25 if progress is not None else None)
            return
        except subprocess.TimeoutExpired:
            try:
                if progress is not None and show is not None:
                    show(progress.poll())
            except Exception:  # showing progress must never end the run: stop showing it
                progress = None
        except KeyboardInterrupt:
            forward(signal.SIGINT, None)


def finalise(run: Path, profile: Profile, returncode: int | None, interrupted: list[int] | None = None,
             span: tuple[float, float] | None = None) -> Profile:
    """Write the final record from the event stream; never raises on a damaged stream. A disk that filled during the
    run marks the record incomplete (what was written after that is lost); the space set aside at the start
    (``reserve_space``) is freed so that this record can still be written."""
    full = low_disk(run)
    release_space(run)
    from yolodoctor.record import ranks

    events = list(read_events(run / EVENTS))
    end = _run_end(events)
    launcher = list(read_events(run / LAUNCHER_EVENTS))  # `profile device=0,1`: the process that launched the ranks
    others = {r: list(read_events(path)) for r, path in ranks.streams(run).items() if r != 0}  # DDP's other ranks
    ends = (end, _run_end(launcher), *(_run_end(ev) for ev in others.values()))
    failed = [e for e in ends if e is not None and e.get("status") != "complete"]
    if failed:  # under DDP the first failure is the cause (a rank's OOM); the others' ends are its side effects
        end = min(failed, key=_time)
    profile.summary, rows = resummarise(run, {}, events, others)
    if rows:
        profile.ranks = rows
    main = profile.summary.get("train_index", 0)
    profile.settings = settings_of(events, main)
    profile.trace = _last(events, "trace")
    profile.loader_capacity = _last(events, "loader_capacity")
    if profile.trace and profile.trace.get("file"):
        profile.files["trace"] = profile.trace["file"]
    profile.exit_code = returncode
    profile.finished = now()
    nonfinite = [e for e in events if e.get("type") == "nonfinite_loss"]
    if end is None:
        profile.status = "incomplete"
        if not events:
            profile.reason = f"no Ultralytics training was seen (exit code {returncode})"
        elif returncode is not None and returncode < 0:
            profile.reason = f"the training process was killed by signal {-returncode}"
        else:
            profile.reason = f"the training process ended without a record (exit code {returncode})"
    elif end.get("status") != "complete":
        profile.status, profile.reason = "incomplete", end.get("reason")
    elif nonfinite:
        profile.status, profile.reason = "incomplete", f"nan: non-finite loss at step {nonfinite[0].get('step')}"
    elif returncode:
        profile.status, profile.reason = "incomplete", f"crashed: the command exited with code {returncode}"
    else:
        profile.status, profile.reason = "complete", None
    if interrupted and profile.status == "complete":
        profile.status, profile.reason = "incomplete", ("terminated" if interrupted[-1] == signal.SIGTERM
                                                        else "interrupted")
    if full is not None:
        note = f"disk full: {full} bytes free where {run} lies; what was recorded after it filled is missing"
        if profile.status == "complete" or end is None:
            profile.status, profile.reason = "incomplete", note
        else:
            profile.reason = f"{profile.reason} ({note})"
    profile.summary["bounded"] = bool(end and end.get("bounded"))
    if span is not None:
        profile.summary["phases"] = split_phases(
            phases(sorted(launcher + events, key=lambda e: e.get("t") or 0.0), *span), profile.summary)
    try:
        profile.save(run)
    except OSError as e:
        from yolodoctor.errors import OutputError

        raise OutputError(f"cannot write {run / PROFILE}: {e.strerror or e}; the record written when the run "
                          "started is still there") from None
    return profile


def _time(e: dict) -> float:
    t = e.get("t")
    return float(t) if isinstance(t, (int, float)) else float("inf")


def _run_end(events: list[dict]) -> dict | None:
    return next((e for e in reversed(events) if e.get("type") == "run_end"), None)


def phases(events: list[dict], spawned: float, ended: float) -> dict[str, float]:
    """Where a run's wall time went, in seconds, from its event stream (on the parent's monotonic clock): ``start``
    (process start, to the recorder's session), ``imports`` (torch and Ultralytics), ``model`` (building the model),
    ``trainer`` (Ultralytics' trainer: the device, the seeds, the data.yaml), ``setup`` (Ultralytics' setup: the
    datasets and their label scan, the AMP check, AutoBatch, the loaders), ``first_batch`` (the loader's workers
    starting, to the first step), ``steps`` (first step to last; record/rederive.split_phases splits it into
    ``training`` and ``pauses``), ``end`` (after the last step: the epoch's end, the loader's timing, the process's
    exit) and ``total``. A part whose event is missing (script mode has no
    ``imported`` or ``model_built``) is merged into the next."""
    def first(type_: str) -> float | None:
        return next((e["t"] for e in events if e.get("type") == type_ and isinstance(e.get("t"), (int, float))), None)

    steps = [e for e in events if e.get("type") == "step" and isinstance(e.get("t0"), (int, float))
             and isinstance(e.get("t1"), (int, float))]
    marks = [("start", first("run_start")), ("imports", first("imported")), ("model", first("model_built")),
             ("trainer", first("train_begin")), ("setup", first("settings")),
             ("first_batch", steps[0]["t0"] - (steps[0].get("wait") or 0) if steps else None),
             ("steps", steps[-1]["t1"] if steps else None)]
    out, last = {}, spawned
    for name, t in marks:
        if t is not None and t >= last:
            out[name], last = round(t - last, 3), t
    out["end"] = round(max(ended - last, 0.0), 3)
    out["total"] = round(ended - spawned, 3)
    return out


def _last(events: list[dict], type_: str) -> dict | None:
    rec = next((e for e in reversed(events) if e.get("type") == type_), None)
    return {k: v for k, v in rec.items() if k not in ("type", "t")} if rec else None


def stopped_by_signal(profile: Profile) -> int | None:
    """130 or 143 when Ctrl-C or SIGTERM stopped the run (a command running several trainings stops there too)."""
    code = exit_code_for(profile)
    return code if code in (130, 143) else None


def exit_code_for(profile: Profile) -> int:
    """130 after Ctrl-C (143 after SIGTERM), 1 when training failed (crash, OOM, NaN), else 0."""
    if profile.reason and profile.reason.startswith("interrupted"):
        return 130
    if profile.reason and profile.reason.startswith("terminated"):
        return 143
    return 1 if profile.status == "incomplete" else 0


def describe(profile: Profile) -> str:
    s = profile.summary
    return json.dumps({k: s.get(k) for k in ("steps", "images", "images_per_s", "data_wait_share")}, default=str)


__all__ = ["PROFILE", "exit_code_for", "finalise", "run_profile"]
