"""What `fix --verify` records: one trial's run, one candidate's verdict, and the report of a trial set."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Protocol

from yolodoctor.fixing.parity import LossParity
from yolodoctor.fixing.planner import Change
from yolodoctor.profiling import hostprobe

if TYPE_CHECKING:
    from yolodoctor.fixing.budget import Estimate


class PooledNoise(Protocol):
    """The machine's run-to-run noise in a set of trials (fixing/judge.Noise): the repeats' pooled relative standard
    deviation and its degrees of freedom."""

    @property
    def deviation(self) -> float | None: ...

    @property
    def df(self) -> int: ...


@dataclass
class TrialRun:
    candidate: str
    rep: int
    run_dir: str
    status: str
    reason: str | None
    images_per_s: float | None
    window_valid: bool | None
    mismatch: list[str] = field(default_factory=list)
    loss_curve: list[tuple[int, float]] | None = None  # (images seen, per-image loss) per optimizer step
    host_ms: float | None = None  # the host probe's loop just before the trial (its profile's host_probe.before)
    window_why: str | None = None  # why its window could not be trusted, and how many more steps it needed
    one_off_s: float | None = None  # time to reach the steady window beyond its images at the steady rate
    seed: int | None = None
    phases: dict[str, float] | None = None  # where its wall time went (profiling/runner.phases)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrialRun:
        """A run as TrialReport.to_dict recorded it (no loss curve), for a replay of recorded trials."""
        kwargs: dict[str, Any] = {f.name: d.get(f.name) for f in fields(cls)}
        return cls(**{**kwargs, "mismatch": d.get("mismatch") or []})


@dataclass
class CandidateVerdict:
    candidate: str
    median: float | None
    runs: int
    gain: float | None  # ratio to the baseline median, minus 1
    kept: bool
    why: str
    parity: LossParity | None = None  # loss: unsafe against unchanged training, safe against the baseline
    inconclusive: bool = False  # held back by noise alone: more repeats could decide it
    versus: str | None = None  # what it was undecided against, where that is not its reference
    rejected: bool = False  # its trials failed, ran something else, could not be timed or failed loss parity
    to_decide: int | None = None  # undecided: repeats of each side that would tell its gain from the noise
    planned_s: float | None = None  # the planned training's estimated wall time with it (one-off + images / rate)
    saved_s: float | None = None  # what it saves over the planned training against its reference's estimate


@dataclass
class TrialReport:
    runs: list[TrialRun]
    verdicts: list[CandidateVerdict]
    baseline_spread: float | None
    kept: list[Change]
    noise: PooledNoise | None = None  # the machine's run-to-run noise in these trials
    wall_s: float | None = None  # the trials' wall time, first start to last end
    estimate: Estimate | None = None  # what verify was expected to cost, and what was skipped

    def fixed_cost(self) -> dict[str, float]:
        """The median seconds of each part of a trial other than its steps (process start, imports and model, setup,
        the first batch, the end), and of the steps and the whole trial, over the trials that recorded them."""
        parts: dict[str, list[float]] = {}
        for r in self.runs:
            for k, v in (r.phases or {}).items():
                parts.setdefault(k, []).append(v)
        return {k: round(statistics.median(v), 2) for k, v in parts.items()}

    @property
    def host_spread(self) -> float | None:
        """How much the host's own speed moved across the trials (slowest / fastest probe loop - 1)."""
        return hostprobe.moved([r.host_ms for r in self.runs])

    def to_dict(self) -> dict[str, Any]:
        return {"runs": [{k: v for k, v in asdict(r).items() if k != "loss_curve"} for r in self.runs],
                "verdicts": [asdict(v) for v in self.verdicts],
                "baseline_spread": self.baseline_spread, "host_spread": self.host_spread,
                "noise": {"deviation": self.noise.deviation, "df": self.noise.df} if self.noise else None,
                "kept": [c.to_dict() for c in self.kept],
                "fixed_cost": self.fixed_cost(), "wall_s": self.wall_s,
                "estimate": self.estimate.to_dict() if self.estimate is not None else None}
