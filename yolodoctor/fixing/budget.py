"""What `fix --verify` will cost, against what the plan can save, and a trial design that fits a budget.

The estimate, before any trial: each trial costs the fixed part the profile being fixed showed (its wall time but
its steps: process start, imports and model, Ultralytics' setup, the first batch, the end) plus a bounded
profile's default steps at the profile's own step time, scaled by the candidate's batch (a conservative figure:
faster candidates finish sooner). The saving is the plan's upper bound over the planned epochs (Plan.run_saving).

By default verify spends at most what the planned training can pay back: what the plan can save over it (so a
one-minute training is never verified for ten minutes); where no rule estimated a saving, the planned training's own
steps (epochs x seconds per epoch). For a training of MIN_EPOCHS or more the design aims at SHARE of that
(default_budget). ``--budget`` sets both.

Fitting a budget drops, in this order, the extra repeats for undecided candidates (max_reps down to reps), then the
candidates with the smallest expected gain. It never drops the baseline, what a kept candidate is measured against,
nor the most valuable trial: the plan as a whole (the candidate holding the most changes: what --apply relaunches),
or where the plan is one change, the candidate with the largest expected gain. Where that is still over the budget,
the plan whole is trialled against the baseline alone. Two repeats stay: the baseline's second, with another seed,
is what measures how much unchanged training's loss varies. Where even that smallest design does not fit,
``Estimate.fits`` is False and verify does not run; it says what it would cost and the command that runs it anyway.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from yolodoctor.fixing.candidates import Candidate
from yolodoctor.fixing.planner import accumulate
from yolodoctor.record import bounds
from yolodoctor.record.settings import Settings

SHARE = 0.25  # for a training of MIN_EPOCHS or more, verify may cost this share of what the plan can save
MIN_EPOCHS = 10
DEFAULT_FIXED_S = 30.0  # a trial's fixed part where the profile recorded none


@dataclass
class Estimate:
    trials: int
    verify_s: float
    per_trial_s: dict[str, float]
    saving_s: float | None
    budget_s: float | None = None
    skipped: list[str] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        """The design fits its budget (or has none)."""
        return self.budget_s is None or self.verify_s <= self.budget_s

    def to_dict(self) -> dict[str, Any]:
        return {"trials": self.trials, "verify_s": round(self.verify_s, 1), "saving_s": self.saving_s,
                "budget_s": self.budget_s, "per_trial_s": {k: round(v, 1) for k, v in self.per_trial_s.items()},
                "skipped": self.skipped, "fits": self.fits}


def default_budget(saving: float | None, epochs: float | None, epoch_s: float | None) -> tuple[float | None,
                                                                                          float | None]:
    """(the design's target, the cap) verify may spend by default: the cap is what the planned training can pay back
    (what the plan can save over it; the planned training's steps where no saving is estimated; 0 where the plan
    saves nothing); the target is SHARE of the saving for a training of MIN_EPOCHS or more, else the cap. The design
    is fitted to the target; verify is skipped only where its smallest design exceeds the cap. (None, None) where
    nothing is known."""
    if saving is not None:
        cap = max(saving, 0.0)
        return (SHARE * cap if epochs is not None and epochs >= MIN_EPOCHS else cap), cap
    if epochs and epoch_s:
        return epochs * epoch_s, epochs * epoch_s
    return None, None


def trial_seconds(cand: Candidate, summary: dict[str, Any], settings: Settings, loader_s: float = 0.0) -> float:
    """One trial of ``cand``: the profile's fixed part (less ``loader_s``, its timing of the loader alone, which trials
    skip) plus its default steps at the profile's step time."""
    ph = summary.get("phases") or {}
    fixed = max(ph["total"] - ph.get("steps", 0.0) - loader_s, 0.0) if ph.get("total") else DEFAULT_FIXED_S
    step = summary.get("step_s_median") or 0.0
    batch0 = settings.get("batch") or 1
    batch = cand.args.get("batch", batch0)
    batch = batch if isinstance(batch, (int, float)) else batch0
    workers = cand.args.get("workers", settings.get("workers") or 0)
    steps = bounds.default_steps(int(workers or 0), settings.get("prefetch_factor"))
    # a run still in the warm-up's ramp of the gradient accumulation extends its bound past it (record/bounds.py):
    # the candidate's batch sets its accumulation (nbs / batch) and its warm-up's iterations (epochs x batches)
    warmup = (settings.get("warmup_iterations") or 0) * batch0 / batch
    ramp = bounds.ramp_end(accumulate(settings.get("nbs") or 64, batch), warmup)
    past = ramp + 2 * bounds.MIN_WINDOW + bounds.ACTIVE
    if ramp and past <= bounds.max_steps(int(workers or 0), settings.get("prefetch_factor")):
        steps = max(steps, past)
    return fixed + steps * step * max(1.0, batch / batch0)


def estimate(cands: list, reps: int, max_reps: int, summary: dict[str, Any], settings: Settings,
             saving: float | None, loader_s: float = 0.0) -> Estimate:
    per = {c.name: trial_seconds(c, summary, settings, loader_s) for c in cands}
    # the first rounds for all; the extra repeats (at most max_reps - reps) counted for the undecided half of them
    extra = max(max_reps - reps, 0) * sum(per.values()) / 2
    return Estimate(len(cands) * reps, sum(per.values()) * reps + extra, per, saving)


def fit(cands: list, reps: int, max_reps: int, summary: dict[str, Any], settings: Settings,
        saving: float | None, budget: float | None, loader_s: float = 0.0) -> tuple[list, int, Estimate]:
    """The candidates and max_reps that fit ``budget`` seconds (None: no budget), with the estimate of that design
    and what was skipped."""
    est = estimate(cands, reps, max_reps, summary, settings, saving, loader_s)
    est.budget_s = budget
    if budget is None or est.verify_s <= budget:
        return cands, max_reps, est
    skipped = []
    if max_reps > reps:
        skipped.append(f"extra repeats for undecided candidates (--max-reps {max_reps} -> {reps})")
        max_reps = reps
    keep = list(cands)
    needed = {c.against for c in cands}

    def cost() -> float:
        return estimate(keep, reps, max_reps, summary, settings, saving, loader_s).verify_s

    def gain(c: Any) -> float:
        return max((x.seconds_saved_per_epoch or 0.0 for x in c.changes), default=0.0)

    # the most valuable trial stays: the plan as a whole (the candidate holding the most changes), what --apply
    # relaunches; for a plan of one change, the largest expected gain
    first = max((c for c in keep if c.name != "baseline"), key=lambda c: (len(c.changes), gain(c)), default=None)
    removable = sorted((c for c in keep if c.name != "baseline" and c.name not in needed and c is not first), key=gain)
    for c in removable:
        if cost() <= budget:
            break
        keep.remove(c)
        skipped.append(f"{c.name} (expected gain the smallest of those left)")
    if cost() > budget and first is not None and len(keep) > 2:
        # still over: the plan whole against the baseline alone; the steps between them are left out
        whole = dataclasses.replace(first, against="baseline", whole=first.whole or len(first.changes) > 1)
        skipped += [f"{c.name} (the plan is trialled whole against the baseline)" for c in keep
                    if c.name != "baseline" and c is not first]
        keep = [c for c in keep if c.name == "baseline"] + [whole]
    est = estimate(keep, reps, max_reps, summary, settings, saving, loader_s)
    est.budget_s, est.skipped = budget, skipped
    return keep, max_reps, est
