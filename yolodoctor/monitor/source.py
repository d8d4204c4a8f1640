"""Where the monitor's records come from. Each source's ``poll()`` runs on a worker thread and returns a Snapshot, or
None when there is nothing new to show (the finished run's final state was already given, or a replay is held).

- RunDirSource: a run directory that ``yolodoctor profile`` (or ``attach``) is writing: events.jsonl and samples.jsonl
  are tailed incrementally; profile.json says when and how the run ended, and then its diagnosis replaces the
  live findings.
- ReplaySource: a recorded run directory (fixtures/profiles/...) released progressively on its own clock, a fixed
  number of recorded seconds per poll: deterministic, for tests and demonstrations.
- MachineSource: no run at all: CPU, memory, disk and GPU of this machine from the profiler's sampler (psutil, NVML).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from yolodoctor.diagnosis.diagnose import diagnose
from yolodoctor.errors import InputError
from yolodoctor.monitor.model import Ending, LiveState, Snapshot

# imported here, not on the worker thread that polls (no module is first imported off the main thread)
from yolodoctor.record import profile as record
from yolodoctor.record import ranks
from yolodoctor.record.events import read_events
from yolodoctor.record.profile import EVENTS, PROFILE, SAMPLES, SPEC
from yolodoctor.record.rundir import open_regular

if TYPE_CHECKING:
    from yolodoctor.api.nvml import Nvml
    from yolodoctor.diagnosis.rules import Compiled
    from yolodoctor.findings import Finding
    from yolodoctor.monitor.launch import Launch


class Source(Protocol):
    """What the monitor polls: a snapshot of the run (None: nothing new, or it is over)."""

    def poll(self) -> Snapshot | None: ...


class Tail:
    """The records appended to a JSONL file since the last read; a line still being written waits for its newline.
    Where only FILE.gz exists (a finished recording) it is read whole, once."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fh: IO[Any] | None = None
        self._rest = b""
        self._gz_read = False

    def read(self) -> list[dict]:
        if self._fh is None:
            try:
                self._fh = open_regular(self.path, binary=True)  # a FIFO in a run dir from elsewhere: no hang
            except FileNotFoundError:
                if not self._gz_read and Path(f"{self.path}.gz").exists():
                    self._gz_read = True
                    return list(read_events(self.path))
                return []
        chunk = self._fh.read()
        if not chunk:
            return []
        lines = (self._rest + chunk).split(b"\n")
        self._rest = lines.pop()
        out = []
        for line in lines:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and "type" in rec:
                out.append(rec)
        return out

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()


def _rules(rules: list[Compiled] | None) -> list[Compiled]:
    if rules is not None:
        return rules
    from yolodoctor.diagnosis.rules import load_rules

    return load_rules()


def _read_json(path: Path) -> dict[str, Any]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) else {}


def final_diagnosis(run_dir: Path, rules: list[Compiled]) -> tuple[Ending, list[Finding] | None] | None:
    """How a finished run ended and its findings (the same as `yolodoctor profile` prints), or None while
    profile.json says it is still running (or cannot be read)."""
    try:
        prof = record.load(run_dir)
    except InputError:
        return None
    if prof.status == "running":
        return None
    try:
        return (Ending(prof.status, prof.reason, prof.exit_code),
                diagnose(run_dir, rules=rules).reported)
    except Exception as e:  # a damaged record: keep the live findings, still say how it ended
        note = f"no final diagnosis ({type(e).__name__}: {e})"
        return Ending(prof.status, prof.reason, prof.exit_code, note=note), None


class RunDirSource:
    def __init__(self, run_dir: str | Path, *, rules: list[Compiled] | None = None, window_s: float = 30.0,
                 label: str | None = None, launch: Launch | None = None) -> None:
        self.run = Path(run_dir)
        self.rules = _rules(rules)
        self.state = LiveState(self.rules, window_s=window_s, label=label or str(run_dir))
        self.events = Tail(self.run / EVENTS)
        self.samples = Tail(self.run / SAMPLES)
        self.rank_tails: dict[int, Tail] = {}  # DDP: the other ranks' streams, found as they appear
        self.launch = launch  # a launch.Launch when the monitor started the training
        self._profile_key: tuple | None = None
        self.done = False

    def _read(self) -> bool:
        if not self.state.spec:
            self.state.spec = _read_json(self.run / SPEC)
        got = self.state.feed_backlog(self.events.read(), self.samples.read())
        for rank, path in ranks.streams(self.run).items():
            if rank != 0 and rank not in self.rank_tails:
                self.rank_tails[rank] = Tail(path)
        if self.rank_tails:
            got = self.state.feed_ranks({r: t.read() for r, t in self.rank_tails.items()}) or got
        return got

    def _profile_changed(self) -> bool:
        try:
            st = os.stat(self.run / PROFILE)
        except OSError:
            return False
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        changed, self._profile_key = key != self._profile_key, key
        return changed

    def _ended(self) -> tuple[Ending, list[Finding] | None] | None:
        if self._profile_changed() and (got := final_diagnosis(self.run, self.rules)):
            return got
        launch = self.launch
        rc = launch.poll() if launch is not None else None
        if launch is None or rc is None:
            return None
        self._profile_key = None
        if got := final_diagnosis(self.run, self.rules):  # finalised just before it exited
            return got
        said = launch.last_line()
        return Ending("incomplete", f"the profile process exited with code {rc} without a final record"
                                    + (f": {said}" if said else f" (log: {launch.log_path})"), rc), None

    def poll(self) -> Snapshot | None:
        if self.done:
            return None
        if self._read():
            self.state.evaluate()
        ended = self._ended()
        if ended:
            if self._read():  # what was written just before the end
                self.state.evaluate()
            self.state.finish(*ended)
            self.done = True
            self.events.close()
            self.samples.close()
            for t in self.rank_tails.values():
                t.close()
        return self.state.snapshot(waiting=self._waiting())

    def _waiting(self) -> str | None:
        if self.state.last_step is not None or self.done:
            return None
        if self.state.events or self.state.start:
            return "waiting for the first training step"
        if self.launch is not None:
            return f"starting the training (log: {self.launch.log_path})"
        return f"waiting for records in {self.run}"


class ReplaySource:
    """A recorded run directory released ``speed`` recorded seconds per poll. ``hold``: stop after that many polls
    (poll returns None) until it is raised - a test sets it to look at the state after exactly N polls."""

    def __init__(self, run_dir: str | Path, *, speed: float = 1.0, rules: list[Compiled] | None = None,
                 window_s: float = 30.0,
                 label: str | None = None, hold: int | None = None) -> None:
        self.run = Path(run_dir)
        self.rules = _rules(rules)
        self.state = LiveState(self.rules, window_s=window_s, label=label or f"{run_dir} (replay)")
        self.state.spec = _read_json(self.run / SPEC)
        ev = [("e", r) for r in read_events(self.run / EVENTS)]
        sm = [("s", r) for r in read_events(self.run / SAMPLES)]
        self.records = sorted(ev + sm, key=lambda x: x[1].get("t") or 0.0)
        self.t0 = self.records[0][1].get("t", 0.0) if self.records else 0.0
        self.speed = speed
        self.hold = hold
        self.polls = 0
        self._next = 0
        self.done = False

    def poll(self) -> Snapshot | None:
        if self.done or (self.hold is not None and self.polls >= self.hold):
            return None
        self.polls += 1
        until = self.t0 + self.polls * self.speed
        events: list[dict] = []
        samples: list[dict] = []
        while self._next < len(self.records) and (self.records[self._next][1].get("t") or 0.0) <= until:
            kind, rec = self.records[self._next]
            (events if kind == "e" else samples).append(rec)
            self._next += 1
        if self.state.feed(events, samples):
            self.state.evaluate()
        if self._next >= len(self.records):
            ended = final_diagnosis(self.run, self.rules)
            self.state.finish(*(ended or (Ending("incomplete", "the recording has no final record"), None)))
            self.done = True
        waiting = None if self.state.last_step or self.done else "waiting for the first training step"
        return self.state.snapshot(waiting=waiting)


class MachineSource:
    """This machine without a training: the sampler's CPU, memory, disk and GPU sections (its process sections
    would describe the monitor itself and are dropped)."""

    def __init__(self, nvml: Nvml | None = None, *, rules: list[Compiled] | None = None) -> None:
        from yolodoctor.profiling.sampler import Sampler

        self.sampler = Sampler(os.getpid(), nvml=nvml)
        self.state = LiveState(rules or [], label="this machine (no run)")
        self.state.feed([], [self.sampler.start_record()])
        self.done = False

    def poll(self) -> Snapshot:
        rec = self.sampler.sample(time.monotonic())
        rec["proc"] = rec["children"] = rec["roles"] = None
        self.state.feed([], [rec])
        return self.state.snapshot(waiting="no training: the machine alone")
