"""The monitor's model: event and sample records in, a :class:`Snapshot` out. No Textual, no I/O.

It computes the same facts as ``diagnosis.facts.live`` (the rule engine's rolling window), but on records kept in
memory - the steps and samples of the last ``window_s`` seconds and every other event (a few per epoch) - so that a
refresh costs the same after an hour of training as after a minute, instead of re-reading whole files. Findings
come from ``LiveEngine`` (hysteresis: a finding appears after ``on`` true evaluations in a row and clears after
``off`` false ones); once the run is over the source replaces them with the run's final diagnosis.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from yolodoctor.diagnosis import facts as facts_mod
from yolodoctor.diagnosis.engine import LiveEngine
from yolodoctor.diagnosis.rules import Compiled
from yolodoctor.findings import Finding, ranked
from yolodoctor.numbers import as_number as _num
from yolodoctor.record import ranks
from yolodoctor.record.profile import Profile
from yolodoctor.record.settings import Settings, as_settings
from yolodoctor.record.summary import summarise_train

HISTORY = 60  # points per graph: one per refresh that brought data
SERIES = ("gpu_util", "gpu_mem", "gpu_power", "cpu_total", "proc_cpu", "workers_cpu", "disk_read", "disk_write",
          "step_s", "images_per_s", "data_wait")


@dataclass(frozen=True)
class Ending:
    """How the run ended: profile.json's status and reason (or why the monitor believes it is over)."""

    status: str  # "complete" | "incomplete"
    reason: str | None = None
    exit_code: int | None = None
    note: str | None = None

    def text(self) -> str:
        return self.status + (f" - {self.reason}" if self.reason else "") + (f" · {self.note}" if self.note else "")


@dataclass
class Snapshot:
    """What the UI shows after one poll."""

    seq: int
    label: str  # what is watched: a run directory, "this machine", a replay
    start: dict | None  # the sampler's start record (GPU identity, core count) or None
    sample: dict | None  # the latest sample
    history: dict[str, list[float]]
    train: dict[str, Any]  # the latest step and the window's figures
    settings: Settings  # the effective settings Ultralytics ran with
    spec: dict[str, Any]  # what was asked (spec.json)
    findings: list[Finding]
    final: bool = False  # findings are the finished run's diagnosis, not the live window's
    ended: Ending | None = None
    waiting: str | None = None  # why nothing is shown yet

    @property
    def gpu_missing(self) -> str | None:
        """Why there are no GPU figures, or None when there are."""
        if self.sample and self.sample.get("gpu"):
            return None
        if self.start is None:
            return "no samples yet" if self.sample is None else "no GPU telemetry"
        return self.start.get("gpu_unavailable") or ("no GPU figures" if self.start.get("gpu") else "no GPU")


def _mean(values: Iterable[Any]) -> float | None:
    vals = [x for x in (_num(v) for v in values) if x is not None]
    return statistics.fmean(vals) if vals else None


def _get(rec: dict | None, *path: str) -> Any:
    for p in path:
        if not isinstance(rec, dict):
            return None
        rec = rec.get(p)
    return rec


class LiveState:
    """Feed it records (any order within a poll is fine, streams are in time order); read a Snapshot."""

    def __init__(self, rules: list[Compiled], *, window_s: float = 30.0, on: int = 3, off: int = 5,
                 label: str = "") -> None:
        self.engine = LiveEngine(rules, on=on, off=off)
        self.window_s = window_s
        self.label = label
        self.events: list[dict] = []  # every event but steps
        self.steps: deque[dict] = deque()  # the last window_s seconds of steps
        self.rank_steps: dict[int, deque[dict]] = {}  # DDP: the other ranks' steps over the same window
        self.rank_pids: dict[int, int | None] = {}
        self.samples: deque[dict] = deque()  # the samples from the window's first step on
        self.start: dict | None = None
        self.last_sample: dict | None = None
        self.last_step: dict | None = None
        self.untraced: list[dict] = []  # the first and the last step outside the trace window
        self.epoch_t: float | None = None  # when the latest epoch started
        self.settings: Settings = as_settings(None)
        self.spec: dict[str, Any] = {}
        self.history: dict[str, deque] = {k: deque(maxlen=HISTORY) for k in SERIES}
        self.facts: dict[str, Any] = {}
        self.final: list[Finding] | None = None
        self.ended: Ending | None = None
        self.seq = 0

    # ------------------------------------------------------------------ input
    def feed(self, events: list[dict], samples: list[dict]) -> bool:
        """Take new records; returns whether any arrived (then the rules run again)."""
        prev_t1 = self.last_step["t1"] if self.last_step else None
        new_steps = []
        for e in events:
            if e.get("type") == "step" and isinstance(e.get("t1"), (int, float)):
                new_steps.append(e)
                self.steps.append(e)
                self.last_step = e
                if not e.get("traced"):  # the span facts.live falls back to when a window is all trace steps
                    self.untraced = [(self.untraced or [e])[0], e]
            else:
                self.events.append(e)
                if e.get("type") == "settings":
                    self.settings = as_settings(e.get("settings"))
                elif e.get("type") == "epoch_start":
                    self.epoch_t = e.get("t")
        new_samples = []
        for s in samples:
            if s.get("type") == "sampler_start":
                self.start = s
            elif s.get("type") == "sample":
                new_samples.append(s)
                self.samples.append(s)
                self.last_sample = s
        if self.last_step:  # keep the window of the latest train() call
            end, ti = self.last_step["t1"], self.last_step.get("train_index")
            while self.steps and (self.steps[0]["t1"] < end - self.window_s or self.steps[0].get("train_index") != ti):
                self.steps.popleft()
        if self.last_sample:  # the samples from the window's first step on (all of them while steps pause), and
            # before the first step since the epoch began (the first step may take minutes: compilation)
            lo = (self.steps[0]["t0"] - 1.0 if self.steps else self.epoch_t - 1.0 if self.epoch_t is not None
                  else self.last_sample["t"] - self.window_s)
            while self.samples and self.samples[0].get("t", 0) < lo:
                self.samples.popleft()
        self._history(new_steps, new_samples, prev_t1)
        return bool(events or samples)

    def feed_ranks(self, streams: dict[int, list[dict]]) -> bool:
        """Take new records of the DDP ranks other than 0 (``{rank: records}``); their steps are kept over the same
        window as rank 0's. Returns whether any arrived."""
        got = False
        for rank, records in streams.items():
            q = self.rank_steps.setdefault(rank, deque())
            for e in records:
                got = True
                if e.get("type") == "run_start":
                    self.rank_pids[rank] = e.get("pid")
                elif e.get("type") == "step" and isinstance(e.get("t1"), (int, float)):
                    q.append(e)
            end = self.last_step["t1"] if self.last_step else (q[-1]["t1"] if q else None)
            while q and end is not None and q[0]["t1"] < end - self.window_s:
                q.popleft()
        return got

    def feed_backlog(self, events: list[dict], samples: list[dict], bucket: float = 1.0) -> bool:
        """feed() in slices of ``bucket`` recorded seconds, so that a backlog (attaching to a run that has been
        going for a while, resuming after a pause) draws the graphs as if it had been watched live."""
        times = [r["t"] for r in events + samples if isinstance(r.get("t"), (int, float))]
        if not times or max(times) - min(times) <= 1.5 * bucket:
            return self.feed(events, samples)
        edge, i, j = min(times) + bucket, 0, 0
        while i < len(events) or j < len(samples):
            i2, j2 = i, j
            while i2 < len(events) and (events[i2].get("t") or 0.0) < edge:
                i2 += 1
            while j2 < len(samples) and (samples[j2].get("t") or 0.0) < edge:
                j2 += 1
            if i2 > i or j2 > j:
                self.feed(events[i:i2], samples[j:j2])
            i, j, edge = i2, j2, edge + bucket
        return True

    def _history(self, steps: list[dict], samples: list[dict], prev_t1: float | None) -> None:
        h = self.history
        if samples:
            gpus = [s["gpu"] for s in samples if s.get("gpu")]
            self._add("gpu_util", _mean(g.get("util") for g in gpus))
            self._add("gpu_mem", _mean(100.0 * g["mem_used"] / g["mem_total"] for g in gpus
                                       if _num(g.get("mem_used")) is not None and g.get("mem_total")))
            self._add("gpu_power", _mean(g.get("power_w") for g in gpus))
            self._add("cpu_total", _mean(_get(s, "cpu", "total") for s in samples))
            self._add("proc_cpu", _mean(_get(s, "proc", "cpu") for s in samples))
            self._add("workers_cpu", _mean(_get(s, "roles", "train_worker", "cpu") for s in samples))
            self._add("disk_read", _mean(_get(s, "disk", "read_bps") for s in samples))
            self._add("disk_write", _mean(_get(s, "disk", "write_bps") for s in samples))
        if steps:
            times = [(s.get("wait") or 0.0) + (s.get("compute") or 0.0) for s in steps]
            h["step_s"].append(statistics.median(times))
            waits = sum(s.get("wait") or 0.0 for s in steps)
            h["data_wait"].append(100.0 * waits / sum(times) if sum(times) > 0 else 0.0)
            span = steps[-1]["t1"] - (prev_t1 if prev_t1 is not None else steps[0]["t0"])
            if span > 0:
                h["images_per_s"].append(sum(s.get("images") or 0 for s in steps) / span)

    def _add(self, key: str, value: float | None) -> None:
        if value is not None:
            self.history[key].append(value)

    # ------------------------------------------------------------------ rules
    def window_facts(self) -> dict[str, Any]:
        """diagnosis.facts.live over the records in memory."""
        steps = list(self.steps)
        if not steps:
            return {}
        summary = summarise_train(steps, self.settings, whole=True)
        last = {t: {k: v for k, v in e.items() if k not in ("type", "t")}
                for e in self.events if (t := e.get("type")) in ("loader_capacity", "trace")}
        samples = ([self.start] if self.start else []) + list(self.samples)
        rows = None
        if self.rank_steps:  # DDP: every rank over the same window, the rate summed (as profile.json has it)
            pid0 = next((e.get("pid") for e in self.events if e.get("type") == "run_start"), None)
            rows = [ranks.row(0, pid0, steps, self.settings, samples, whole=True)]
            rows += [ranks.row(r, self.rank_pids.get(r), list(q), self.settings, samples, whole=True)
                     for r, q in sorted(self.rank_steps.items())]
            ranks.fold(summary, rows)
        prof = Profile(settings=self.settings, summary=summary, loader_capacity=last.get("loader_capacity"),
                       trace=last.get("trace"), host=None, ranks=rows,
                       status="complete" if any(e.get("type") == "run_end" for e in self.events) else "running")
        anchors = [e for e in self.untraced if e["t1"] < steps[0]["t1"]]  # outside the window: only for the span
        return facts_mod.from_profile(prof, events=self.events + anchors[:1] + steps + anchors[1:], samples=samples)

    def evaluate(self) -> None:
        self.facts = self.window_facts()
        self.engine.update(self.facts)

    def finish(self, ending: Ending, final_findings: list[Finding] | None) -> None:
        """The run is over: keep what was last shown, with its ending and (when there is one) its diagnosis."""
        self.ended = ending
        if final_findings is not None:
            self.final = final_findings

    # ------------------------------------------------------------------ output
    def training(self) -> dict[str, Any]:
        s, f, st = self.last_step or {}, self.facts, self.settings
        return {
            "step": s.get("step"), "epoch": s.get("epoch"), "i": s.get("i"), "loss": s.get("loss"),
            "epochs": st.get("epochs"), "batches_per_epoch": st.get("batches_per_epoch"),
            "step_s": f.get("run.step_s"), "images_per_s": f.get("run.images_per_s"),
            "data_wait_share": f.get("run.data_wait_share"), "ranks": f.get("ranks.count"),
        }

    def snapshot(self, waiting: str | None = None) -> Snapshot:
        self.seq += 1
        findings = self.final if self.final is not None else ranked(self.engine.active.values())
        return Snapshot(self.seq, self.label, self.start, self.last_sample,
                        {k: list(v) for k, v in self.history.items()}, self.training(), as_settings(self.settings),
                        dict(self.spec), list(findings), final=self.final is not None, ended=self.ended,
                        waiting=waiting)
