"""`fix --verify`: short A/B trials on the user's own dataset and pipeline, interleaved and repeated.

Each trial is a bounded `profile` of the real training (same dataset, augmentation, epochs - hence the same mosaic
and warm-up phase - as the run being fixed) with the default step rule, whose steady window is longer than the
loader's prefetch queue. The baseline, each change on top of what it needs (candidates() says which), the safe
fallbacks and the whole plan run in turn, in ABBA order (B c1 c2 ... P, then P ... c2 c1 B), so drift of the machine
hits them alike. A change is kept when its median images/s beats its reference's (the baseline, or the candidate
holding what it requires) by more than the noise threshold, it beats the reference in nearly every pair of repeats,
every one of its trials completed, and what ran is what was asked (no batch halved after OOM, no compile fallen back
to eager).

Noise threshold: a t-test's, at least MIN_GAIN. The machine's run-to-run noise is one: the relative standard deviation
of repeats is pooled over every configuration that ran two or more times (their variances weighted by degrees of
freedom), and a candidate's median must beat its reference's by t(0.975, df) x the standard error of the difference,
each side taken at the pooled deviation or at its own where that is larger (a configuration noisier than the machine's
usual - bimodal, say - is not judged at the usual noise).
Pooling uses every trial of the set: on the H200 (lease 78286506) the six configurations' own deviations were
4-13% from two or four repeats each - estimates that noisy made the rule before this one (twice the larger of the
two compared relative ranges, narrowed by d2(n)) swing with whichever pair it compared, and let a 4.5%-spread
baseline pair look quieter than the machine is. Pairs: with two repeats each, the candidate's slowest must beat the
reference's fastest; with more, it must win at least PAIRS_WON of all (candidate, reference) pairs.

Measured together: the kept changes are first merged from the candidates each kept on its own; then a kept candidate
holding all of them and more (the whole plan, typically) replaces them when it beats the candidate holding exactly
them beyond the noise and in the pairs (and runs again against it where it is faster only within the noise). A change
rejected on its own (failed or mismatched trials, no valid window, a failed loss parity) never comes in that way.
Where the plan changes training, the plan with its safe fallbacks instead (its safe part) is such a whole too. On
the H200 the whole plan ran 1029 images/s against the kept batch=64 + workers=14's 856 (+20%, every pair won), while
compile on its own showed +6.7% and deterministic=False -7.1%, both inside the noise: each alone was undecided,
together they were faster, and fix applied the slower set.

More repeats where they decide something: after ``reps`` rounds, a candidate held back by noise alone (a gain above
MIN_GAIN that does not clear the threshold or the pairs) is run again with its reference (the whole plan: with the
kept changes' candidate), one round at a time in alternating order, until it is decided or ``max_reps`` repeats
are reached (issue 6: on the H200 the host's own speed is bimodal, and two repeats of a 21%-spread baseline set a
43% threshold that hid a compile gain of ~20-30%).
The trade-off: a candidate judged after each round has up to max_reps - reps + 1 chances to pass, so a change that
does nothing is kept a little more often than with one look; the pairs rule and MIN_GAIN bound it, and --max-reps
equal to --reps gives one look. A candidate is not kept over a reference that did not run cleanly (a failed or
mismatched trial): it would bring that change in with it. Each trial's profile times the host's own speed just
before it (profiling/hostprobe: a fixed Python loop); `host_spread` says how much the machine itself moved across
the trials, which a shared machine does.

Settled by the loss: a candidate that changes training and whose loss is worse than unchanged training's by more than
CLEAR x its band after a round is not run again (loss_settled); its verdict rests on the repeats it had.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable

from yolodoctor.fixing.parity import BROKEN, SAFE_FLOOR, opt_points, parity, t975
from yolodoctor.fixing.planner import (LOADER_REASON, LOADER_SIDE, Change, ChangeSet, Plan, accumulate,
                                       requirements)
from yolodoctor.profiling import hostprobe

MIN_GAIN = 0.03
PAIRS_WON = 0.8
CLEAR = 2.0  # a loss worse than unchanged training's by this many times its band is not repeated (loss_settled)
DECIDE_MAX = 20  # more repeats of each than this to tell a gain from the noise: not worth a user's GPU time


@dataclass
class Candidate(ChangeSet):
    name: str
    changes: list[Change]
    against: str = "baseline"  # the candidate its gain is measured over (the one holding what it requires)
    whole: bool = False  # a whole set (the plan, its safe part): it comes in only measured together, never merged


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
    def from_dict(cls, d: dict[str, Any]) -> "TrialRun":
        """A run as TrialReport.to_dict recorded it (no loss curve), for a replay of recorded trials."""
        return cls(**{**{f.name: d.get(f.name) for f in fields(cls)}, "mismatch": d.get("mismatch") or []})


@dataclass
class Verdict:
    candidate: str
    median: float | None
    runs: int
    gain: float | None  # ratio to the baseline median, minus 1
    kept: bool
    why: str
    parity: dict[str, Any] | None = None  # loss: unsafe against unchanged training, safe against the baseline
    inconclusive: bool = False  # held back by noise alone: more repeats could decide it
    versus: str | None = None  # what it was undecided against, where that is not its reference
    rejected: bool = False  # its trials failed, ran something else, could not be timed or failed loss parity
    to_decide: int | None = None  # undecided: repeats of each side that would tell its gain from the noise
    planned_s: float | None = None  # the planned training's estimated wall time with it (one-off + images / rate)
    saved_s: float | None = None  # what it saves over the planned training against its reference's estimate


@dataclass
class TrialReport:
    runs: list[TrialRun]
    verdicts: list[Verdict]
    baseline_spread: float | None
    kept: list[Change]
    noise: Noise | None = None
    wall_s: float | None = None  # the trials' wall time, first start to last end
    estimate: Any = None  # fixing/budget.Estimate: what verify was expected to cost, and what was skipped

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
                "noise": asdict(self.noise) if self.noise else None, "kept": [c.to_dict() for c in self.kept],
                "fixed_cost": self.fixed_cost(), "wall_s": self.wall_s,
                "estimate": self.estimate.to_dict() if self.estimate is not None else None}


def candidates(plan: Plan) -> list[Candidate]:
    """The baseline; each change on top of what it ``requires`` (compile with CUDA graphs needs the batch change that
    ends gradient accumulation; workers sized for a bigger batch need it), followed transitively and judged against
    the candidate holding exactly that (else the baseline); the safe fallbacks of unsafe changes; and the whole plan
    where no candidate holds it.

    Above the loader's ceiling: where the planner added workers because the plan would outrun the loader
    (LOADER_REASON), every other change but the loader side is tried on top of that workers change and what it
    requires, and judged against them. On the H200 (lease dd6bc160) batch=64+compile at 8 workers met the 537
    images/s the loader delivers and showed no gain, while batch 64 with 16 workers ran 861 images/s compiled and 660
    eager (bench/results/h200-benchmark). Where the workers change rests on a change to training, the stacking is
    done on that change's safe fallback (batch 64 beside batch 128 above nbs), so that a safe change is not tied to
    the unsafe one's loss parity, and the unsafe change is tried with the workers too; with no usable fallback
    (none, or one at which a planned compile='reduce-overhead' would meet gradient accumulation) nothing is stacked.

    Where the plan changes training, its safe part (_safe_part) is a whole candidate too, so that the safe changes can
    still be applied together when an unsafe one fails its loss parity."""
    w = next((c for c in plan.changes if c.kind == "args" and c.key == "workers" and c.reason == LOADER_REASON), None)
    world = list(plan.changes)  # where the stacked candidates are built
    below = requirements(w, plan.changes) if w is not None else []  # what the workers change rests on
    for u in below:
        if u.changes_training:
            f = next((f for f in plan.fallbacks if (f.kind, f.key) == (u.kind, u.key) and _usable(f, plan)), None)
            if f is None:
                w = None  # stacked on an unsafe change, every change would share its loss parity: stack nothing
                break
            world = [f if c is u else c for c in world]
    lifted = [*requirements(w, world), w] if w is not None else []
    out = [Candidate("baseline", [])]
    needed: dict[str, list[Change]] = {}

    def add(needs: list[Change], c: Change) -> None:
        name = "+".join(f"{d.key}={d.after}" for d in [*needs, c])
        if name not in needed:
            out.append(Candidate(name, [*needs, c]))
            needed[name] = needs

    for c in plan.changes:
        if lifted and all(c is not d for d in [*lifted, *below]) and c.key not in LOADER_SIDE:
            add([*lifted, *(d for d in requirements(c, world) if all(d is not x for x in lifted))], c)
        else:
            add(requirements(c, plan.changes), c)
    if lifted:
        add(lifted[:-1], w)  # the reference of the stacked candidates (on the fallback, where there is one)
    out += [Candidate(f"{c.key}={c.after}", [c]) for c in plan.fallbacks
            if f"{c.key}={c.after}" not in {x.name for x in out}]
    # every reference exists: what a candidate requires is itself a candidate, built on what its last change requires
    # (compile as the workers' driver: batch=64+compile under batch=64+compile+workers)
    for cand in out[1:]:
        needs = needed.get(cand.name) or []
        while needs and not any(_same(o.changes, needs) for o in out):
            add(needs[:-1], needs[-1])
            needs = needs[:-1]
    for cand in out[1:]:
        needs = needed.get(cand.name) or []
        cand.against = next((o.name for o in out if needs and _same(o.changes, needs)), "baseline")
    if len(plan.changes) > 1 and not any(_same(c.changes, plan.changes) for c in out):
        out.append(Candidate("plan", list(plan.changes), whole=True))
    safe = _safe_part(plan, lifted)
    if len(safe) > 1 and not any(_same(c.changes, safe) for c in out):
        out.append(Candidate("+".join(f"{d.key}={d.after}" for d in safe), safe, whole=True))
    return out


def _safe_part(plan: Plan, lifted: list[Change]) -> list[Change]:
    """The plan with each change to training replaced by its usable safe fallback, or left out where it has none (and
    so each change that requires a change left out): what the plan is with --allow-unsafe's changes taken away,
    lifted changes first. Without it, an unsafe change that failed its loss parity would take the safe changes it was
    measured with down too, and --allow-unsafe would apply less than fix without it (the H200's fix-unsafe trials,
    lease f32ae53c: the whole plan rejected on loss, only batch 64 + workers 14 + compile kept)."""
    subs = {id(c): next((f for f in plan.fallbacks if (f.kind, f.key) == (c.kind, c.key) and _usable(f, plan)), None)
            for c in plan.changes if c.changes_training}
    if not subs:
        return list(plan.changes)
    out = [subs.get(id(c), c) if c.changes_training else c for c in plan.changes]
    out = [c for c in out if c is not None]
    while bad := [c for c in out if any(k not in {d.key for d in out} for k in c.requires)]:
        out = [c for c in out if all(c is not b for b in bad)]
    first = [c for c in lifted if any(c is d for d in out)]
    return [*first, *(c for c in out if all(c is not d for d in first))]


def _usable(f: Change, plan: Plan) -> bool:
    """A fallback at which the plan's other changes can run: no CUDA graphs with gradient accumulation
    (pytorch/pytorch#169545)."""
    graphs = any(c.kind == "args" and c.key == "compile" and c.after == "reduce-overhead" for c in plan.changes)
    return not (graphs and f.kind == "args" and f.key == "batch" and isinstance(f.after, (int, float))
                and accumulate(plan.nbs, f.after) > 1)


def _same(a: list[Change], b: list[Change]) -> bool:
    return len(a) == len(b) and all(any(x is y for y in b) for x in a)


def mismatches(asked: dict[str, Any], settings: dict[str, Any]) -> list[str]:
    """What ran differently from what was asked (read off the trial's effective settings)."""
    out = []
    if "batch" in asked and isinstance(asked["batch"], int) and asked["batch"] > 0 and settings.get("batch") and \
            settings["batch"] != asked["batch"]:
        out.append(f"batch {asked['batch']} asked, {settings['batch']} ran (halved after out-of-memory)")
    if asked.get("compile") and settings.get("compile_active") is False:
        out.append(f"compile={asked['compile']!r} asked, the model ran eager (compile fell back)")
    if asked.get("amp") not in (None, False, "fp32") and settings.get("amp") is False:
        out.append(f"amp={asked['amp']!r} asked, training ran in float32 (AMP check failed or CPU)")
    if "workers" in asked and settings.get("workers") is not None and settings["workers"] < asked["workers"]:
        out.append(f"workers={asked['workers']} asked, {settings['workers']} ran (Ultralytics' clamp)")
    return out


def _ok(rs: list[TrialRun]) -> list[float]:
    return [r.images_per_s for r in rs if r.images_per_s and r.status == "complete"]


@dataclass(frozen=True)
class Noise:
    """The machine's run-to-run noise in a set of trials: relative standard deviation of repeats, pooled over the
    configurations that ran two or more times cleanly, and its degrees of freedom."""
    deviation: float | None
    df: int

    @classmethod
    def of(cls, groups: list[list[float]]) -> "Noise":
        sums = [((len(g) - 1) * _rsd(g) ** 2, len(g) - 1) for g in groups if len(g) >= 2]
        df = sum(d for _, d in sums)
        return cls(math.sqrt(sum(v for v, _ in sums) / df) if df else None, df)

    def threshold(self, a: list[float], b: list[float]) -> float:
        """The gain a's median must show over b's: a t-test's at 97.5% one-sided, at least MIN_GAIN. Each side's
        deviation is the pooled one or its own, whichever is larger (a configuration noisier than the machine's
        usual is not judged at the usual noise); the standard error of a median is taken as a mean's."""
        if not self.deviation or self.df < 1 or not a or not b:
            return MIN_GAIN
        t = t975(self.df)
        se2 = sum(max(self.deviation, _rsd(g) if len(g) >= 2 else 0.0) ** 2 / len(g) for g in (a, b))
        return max(t * math.sqrt(se2), MIN_GAIN)

    def repeats_to_decide(self, gain: float) -> int | None:
        """How many repeats of each side would put the threshold under ``gain`` at this noise (the t of today's
        degrees of freedom: more repeats only lower it), or None: no noise measured, a gain under MIN_GAIN (never
        kept), or more than DECIDE_MAX repeats. An estimate: a side noisier than the pooled deviation needs more."""
        if not self.deviation or self.df < 1 or gain <= MIN_GAIN:
            return None
        t = t975(self.df)
        n = max(2, math.ceil(2 * (t * self.deviation / gain) ** 2 + 1e-9))
        return n if n <= DECIDE_MAX else None


def _rsd(g: list[float]) -> float:
    """Relative standard deviation of repeats (two or more)."""
    return statistics.stdev(g) / statistics.fmean(g)


def pairs_won(a: list[float], b: list[float]) -> float:
    """The share of (a, b) pairs of repeats in which a is faster."""
    return sum(x > y for x in a for y in b) / (len(a) * len(b)) if a and b else 0.0


def judge(runs: list[TrialRun], cands: list[Candidate], planned_images: float | None = None
          ) -> tuple[list[Verdict], float | None, list[Change], Noise]:
    """The verdicts, the baseline's spread, the kept changes and the noise. ``planned_images``: the images the user's
    training will process (epochs x images per epoch); with it, a change faster in steady state is kept only where
    its one-off cost (filling a cache, compiling: TrialRun.one_off_s) leaves time saved over that training."""
    by: dict[str, list[TrialRun]] = {c.name: [r for r in runs if r.candidate == c.name] for c in cands}
    base = _ok(by["baseline"])
    base_med = statistics.median(base) if base else None
    spread = (max(base) - min(base)) / base_med if len(base) >= 2 and base_med else None
    noise = Noise.of([_ok(rs) for rs in by.values() if not any(r.mismatch for r in rs)])
    safe_par, unchanged = _loss_references(by, cands)
    moved = _moved(safe_par)
    verdicts, kept = [], []
    for c in cands:
        rs = by[c.name]
        ok = _ok(rs)
        med = statistics.median(ok) if ok else None
        ref_vals = base if c.against == "baseline" else _ok(by.get(c.against, []))
        ref = statistics.median(ref_vals) if ref_vals else None
        limit, base_limit = noise.threshold(ok, ref_vals), noise.threshold(ok, base)
        gain = med / ref - 1 if med and ref else None
        if c.name == "baseline":
            verdicts.append(Verdict(c.name, med, len(rs), 0.0 if med else None, False,
                                    f"spread of repeats {spread:.1%}" if spread is not None else "one repeat"))
            continue
        failed = [r for r in rs if r.status != "complete"]
        mism = sorted({m for r in rs for m in r.mismatch})
        ref_rs = by.get(c.against, []) if c.against != "baseline" else []
        ref_bad = next((f"trial failed: {r.reason}" if r.status != "complete" else
                        f"what ran is not what was asked: {r.mismatch[0]}" for r in ref_rs
                        if r.status != "complete" or r.mismatch), None)
        alters = any(x.changes_training for x in c.changes)  # an unsafe change: faster is not enough (DESIGN.md 3)
        par = parity(unchanged, _curves(rs)) if alters else safe_par.get(c.name)  # as loss_settled reads them
        need = _need(ok, ref_vals)
        cost = _wall(by, c, planned_images)
        held, versus, rejected = False, None, False
        if failed:
            why, keep, rejected = f"trial failed: {failed[0].reason}", False, True
        elif mism:
            why, keep, rejected = f"what ran is not what was asked: {mism[0]}", False, True
        elif ref_bad:  # what it is measured over (and would bring in) did not run cleanly
            why, keep = f"its reference {c.against} did not run cleanly ({ref_bad})", False
        elif c.against in moved:  # ... or broke the loss: keeping this would bring that change in
            why, keep = f"its reference {c.against} was rejected: its loss broke away from unchanged training's", False
        elif gain is None:
            why, keep = "no throughput measured", False
        elif short := next((r for r in rs if r.window_valid is False), None):
            why, keep, rejected = f"window too short to conclude: {short.window_why or 'no steady window'}", False, True
        elif par is not None and (not par["within"] if alters else par.get("broken")):  # no repeat makes it learn
            over = "" if c.against == "baseline" else f" over {c.against}"
            what = ("it changes training and its loss is {:+.1%} against unchanged training's" if alters else
                    "its loss is {:+.1%} against unchanged training's").format(par["rel"])
            band = f"band {par['band']:.1%}" if alters else f"{BROKEN:.0f} x the band {par['band']:.1%}"
            why, keep, rejected = (f"{gain:+.1%}{over}, but {what} after {par['images']} images ({_steps(par)}; "
                                   f"{band})"), False, True
            if not alters:
                why += ": a change meant to keep training broke it"
        elif gain > limit and c.against != "baseline" and base_med and med / base_med - 1 <= base_limit:
            why, keep = (f"{gain:+.1%} over {c.against}, but only {med / base_med - 1:+.1%} over the baseline "
                         f"(threshold {base_limit:.1%})"), False
            held, versus = med / base_med - 1 > MIN_GAIN, "baseline"  # undecided against the baseline: run it
        elif gain > limit and len(ref_vals) >= 2 and pairs_won(ok, ref_vals) < need:
            why, keep = ((f"{gain:+.1%} median, but its slowest repeat ({min(ok):.1f}) does not beat the fastest of "
                          f"{c.against} ({max(ref_vals):.1f})") if need == 1.0 else
                         (f"{gain:+.1%} median, but it is faster than {c.against} in only "
                          f"{pairs_won(ok, ref_vals):.0%} of the pairs of repeats (needs {need:.0%})")), False
            held = True
        elif gain > limit and alters and par is None:
            why, keep, rejected = (f"{gain:+.1%}, but it changes training and its loss could not be compared with "
                                   "unchanged training's (too few optimizer steps after the same images)"), False, True
        elif gain > limit and alters and par["band_from"] != "runs":
            why, keep, rejected = (f"{gain:+.1%}, but it changes training and only one run of unchanged training "
                                   f"reaches its {par['images']} images: how much another seed moves the loss is not "
                                   "measured (the curve's own scatter understates it), so its loss cannot be judged; "
                                   "--reps 2 or more runs the baseline with another seed"), False, True
        elif gain > limit and cost and cost[1] <= 0:
            why, keep = (f"{gain:+.1%} in steady state, but over the planned training ({planned_images:.0f} images) its "
                         f"one-off {cost[2]:.0f} s costs more than it saves: about {cost[0]:.0f} s against "
                         f"{cost[0] + cost[1]:.0f} s"), False
        elif gain > limit:
            over = "" if c.against == "baseline" else f" over {c.against}"
            why, keep = f"{gain:+.1%}{over} beats the noise threshold {limit:.1%}", True
            if cost:
                why += (f"; saves about {cost[1]:.0f} s over the planned training ({planned_images:.0f} images), "
                        f"one-off {cost[2]:.0f} s included")
            if par is not None and alters:
                why += (f"; loss {par['rel']:+.1%} against unchanged training's after {par['images']} images "
                        f"({_steps(par)}), within {par['band']:.1%}")
        else:
            why, keep = f"{gain:+.1%} is within the noise threshold {limit:.1%}", False
            held = gain > MIN_GAIN
        if par is not None and not alters and par.get("moved") and not rejected:
            why += f"; its loss moved {par['rel']:+.1%} (band {par['band']:.1%}), as expected: {moved_cause(c)}"
        verdicts.append(Verdict(c.name, med, len(rs), gain, keep, why, par, inconclusive=held, versus=versus,
                                rejected=rejected,
                                to_decide=_to_decide(noise, held, ok, base if versus == "baseline" else ref_vals),
                                planned_s=cost[0] if cost else None, saved_s=cost[1] if cost else None))
    # the kept changes: kept candidates merged fastest first, each whole or not at all - one that sets a key to
    # another value than a faster one did is left out with everything it brings (a change comes with the
    # requirements it ran with: no batch=32 under a compile that was measured at batch 128); not the whole sets here
    # (the plan and its safe part come in measured together; an unsafe change and its safe fallback may both pass:
    # the faster holds the key)
    chosen: dict[tuple[str, str], Change] = {}
    ranked = sorted(((v, c) for c, v in zip(cands[1:], verdicts[1:]) if v.kept and not c.whole),
                    key=lambda vc: -vc[0].median)
    for _, c in ranked:
        if all(chosen.get((x.kind, x.key), x) is x for x in c.changes):
            chosen.update({(x.kind, x.key): x for x in c.changes})
    for c in cands:  # in candidate order
        kept.extend(x for x in c.changes if chosen.get((x.kind, x.key)) is x and all(x is not y for y in kept))
    whole = _measured_together(by, cands, verdicts, kept, noise)
    for c, v in zip(cands[1:], verdicts[1:]):  # a whole set is kept only where it is what gets applied
        if c.whole and c is not whole and v.kept:
            v.kept = False
            if "not applied whole" not in v.why:
                v.why += (f"; not applied: {whole.name} is applied whole" if whole is not None else
                          "; not applied whole: no candidate holds exactly the kept changes, to measure it against")
    if whole is None:
        return verdicts, spread, kept, noise
    for c, v in zip(cands[1:], verdicts[1:]):  # decided by the whole: no more repeats for what it holds
        if v.inconclusive and all(any(x is y for y in whole.changes) for x in c.changes):
            v.inconclusive, v.to_decide = False, None
    return verdicts, spread, list(whole.changes), noise


def _wall(by: dict[str, list[TrialRun]], c: Candidate, planned_images: float | None
          ) -> tuple[float, float, float] | None:
    """(the planned training's estimated seconds with the candidate, seconds it saves against its reference's
    estimate, its one-off seconds): each side's median one-off plus the planned images at its median steady rate.
    None where a side has no clean timed run with a one-off, or no planned training is known."""
    if not planned_images:
        return None

    def estimate(rs: list[TrialRun]) -> tuple[float, float] | None:
        ok = [r for r in rs if r.status == "complete" and r.images_per_s and r.one_off_s is not None]
        if not ok:
            return None
        one_off = statistics.median(r.one_off_s for r in ok)
        return one_off + planned_images / statistics.median(r.images_per_s for r in ok), one_off

    mine, ref = estimate(by.get(c.name, [])), estimate(by.get(c.against, []))
    if mine is None or ref is None:
        return None
    return mine[0], ref[0] - mine[0], mine[1]


def _loss_references(by: dict[str, list[TrialRun]], cands: list[Candidate]
                     ) -> tuple[dict[str, dict[str, Any] | None], list[list[tuple[int, float]]]]:
    """Each training-equivalent candidate's breakage check, and unchanged training's loss curves.

    The baseline's repeats (another seed each) and the trials of changes that do not change training are all
    unchanged training. Each such candidate is held to the others (leave-one-out), with SAFE_FLOOR under the band, and
    is broken only when its loss is worse by more than BROKEN x the band (``broken`` in its parity): a change meant
    to keep training that clearly changed it. A curve that moved within that is reported, never rejected: another
    worker count or the RAM cache shift the random streams as another seed does. The candidates not broken are
    loss parity's reference for the changes that do change training."""
    safe = [c for c in cands if not any(x.changes_training for x in c.changes)]
    curves = {c.name: _curves(by[c.name]) for c in safe}
    safe_par: dict[str, dict[str, Any] | None] = {}
    for c in safe:
        if c.name == "baseline":
            continue
        others = [cv for o in safe if o.name != c.name for cv in curves[o.name]]
        p = parity(others, curves[c.name], floor=SAFE_FLOOR)
        if p is not None:
            p["broken"] = p["rel"] > BROKEN * p["band"]
            p["moved"] = abs(p["rel"]) > p["band"]
        safe_par[c.name] = p
    broken = _moved(safe_par)
    return safe_par, [curve for c in safe if c.name not in broken for curve in curves[c.name]]


def _moved(safe_par: dict[str, dict[str, Any] | None]) -> set[str]:
    """The training-equivalent candidates whose loss broke away from unchanged training's."""
    return {n for n, p in safe_par.items() if p is not None and p.get("broken")}


# why a training-equivalent change's loss curve moves, where it does (read in Ultralytics 8.4 and torch)
MOVED_CAUSE = {
    "workers": "each loader worker draws its own augmentation random stream, so another worker count trains on other "
               "augmentations, as another seed does",
    "cache": "Ultralytics' RAM-cache check reads 30 random images (data/base.py check_cache_ram), shifting every later "
             "augmentation, and the cache turns the mosaic buffer off (mosaic then picks from the whole dataset)",
    "batch": "another batch size groups the images differently",
    "deterministic": "non-deterministic kernels sum in another order",
    "compile": "compiled kernels sum in another order",
}


def moved_cause(c: Candidate) -> str:
    keys = [x.key.split(".")[0] for x in c.changes]
    causes = [MOVED_CAUSE[k] for k in dict.fromkeys(keys) if k in MOVED_CAUSE]
    return "; ".join(causes) or "floating-point sums in another order"


def loss_settled(runs: list[TrialRun], cands: list[Candidate]) -> dict[str, str]:
    """The candidates that change training whose loss is already worse than unchanged training's by more than
    CLEAR x its band: more repeats would time a change that cannot be kept (no repeat makes it learn as before; repeats
    of seeded deterministic training compute the same curve). On the H200's fix-unsafe trials (lease f32ae53c) after
    one round: batch 128 +33.5% (band 3.5%), batch 128 with the workers +32.3% (3.9%), the whole plan +22.6% (3.2%);
    bf16 at batch 64, +3.9% against a 2% band, ran its second repeat. Name -> why."""
    by = {c.name: [r for r in runs if r.candidate == c.name] for c in cands}
    if not by.get("baseline"):
        return {}
    _, unchanged = _loss_references(by, cands)
    out = {}
    for c in cands:
        if any(x.changes_training for x in c.changes) and (p := parity(unchanged, _curves(by[c.name]))) is not None \
                and p["rel"] > CLEAR * p["band"]:
            out[c.name] = (f"loss {p['rel']:+.1%} against unchanged training's after {p['images']} images, band "
                           f"{p['band']:.1%}")
    return out


def _curves(rs: list[TrialRun]) -> list[list[tuple[int, float]]]:
    """The loss curves of the repeats that ran what was asked to the end."""
    return [r.loss_curve or [] for r in rs if r.status == "complete" and not r.mismatch]


def _to_decide(noise: Noise, held: bool, ok: list[float], against: list[float]) -> int | None:
    """For a candidate held back by noise: the repeats of each side that would tell its gain over what it is
    undecided against (its reference, the baseline, or the kept set) from the noise, at least one more than it had."""
    if not held or not ok or not against:
        return None
    n = noise.repeats_to_decide(statistics.median(ok) / statistics.median(against) - 1)
    return max(n, len(ok) + 1) if n else None


def _need(ok: list[float], ref: list[float]) -> float:
    """The share of pairs of repeats a candidate must win: all of them at two repeats each, PAIRS_WON beyond."""
    return 1.0 if len(ok) <= 2 and len(ref) <= 2 else PAIRS_WON


def _measured_together(by: dict[str, list[TrialRun]], cands: list[Candidate], verdicts: list[Verdict],
                       kept: list[Change], noise: Noise) -> Candidate | None:
    """The fastest kept candidate that holds every kept change and more and beats the candidate holding exactly the
    kept ones (the baseline where none was kept) beyond the noise and in the pairs; one that is faster only within
    the noise is marked undecided against it (its verdict says so), for more repeats. None where no candidate holds
    exactly the kept changes (merged from several candidates): there is nothing measured to compare with."""
    ref = next((c for c in cands if _same(c.changes, kept)), None)
    ref_vals = _ok(by[ref.name]) if ref else []
    if not ref_vals:
        return None
    # a change whose own candidate was rejected - a failed or mismatched trial, no window (the change it tries, its
    # last), a failed loss parity (the changes that change training, not the safe ones beside them) - does not come
    # in with a faster whole
    def blamed(c: Candidate) -> list[Change]:
        clean = all(r.status == "complete" and not r.mismatch and r.window_valid is not False for r in by[c.name])
        alters = [x for x in c.changes if x.changes_training]
        return alters if clean and alters else [c.changes[-1]]

    rejected = [x for c, v in zip(cands[1:], verdicts[1:]) if v.rejected and not c.whole for x in blamed(c)]
    ref_med, best, best_med = statistics.median(ref_vals), None, 0.0
    for c, v in zip(cands[1:], verdicts[1:]):
        if not v.kept or c is ref or not all(any(x is y for y in c.changes) for x in kept):
            continue
        bad = [x for x in c.changes if any(x is y for y in rejected) and all(x is not y for y in kept)]
        if bad:
            v.why += f"; not applied whole: {bad[0].key}={bad[0].after!r} was rejected on its own"
            continue
        ok = _ok(by[c.name])
        gain, limit = v.median / ref_med - 1, noise.threshold(ok, ref_vals)
        if c.against == ref.name or (gain > limit and pairs_won(ok, ref_vals) >= _need(ok, ref_vals)):
            if c.against != ref.name:  # judged against the kept ones here (its verdict is against its reference)
                v.why += f"; applied whole: {gain:+.1%} over {ref.name} beats the noise threshold {limit:.1%}"
            best, best_med = (c, v.median) if v.median > best_med else (best, best_med)
        elif gain > MIN_GAIN:
            short = (f"within the noise threshold {limit:.1%}" if gain <= limit else
                     f"faster in only {pairs_won(ok, ref_vals):.0%} of the pairs of repeats")
            v.why += f"; {gain:+.1%} over what was kept ({ref.name}), {short}: not applied whole"
            v.inconclusive, v.versus = True, ref.name
            v.to_decide = _to_decide(noise, True, ok, ref_vals)
    return best


def undecided(verdicts: list[Verdict], cands: list[Candidate]) -> list[Candidate]:
    """The candidates to run once more: each one held back by noise alone, with what it is undecided against (its
    reference, the baseline only where that is it; for the whole plan, the kept changes' candidate)."""
    undecided_ = [v for v in verdicts if v.inconclusive]
    names = {v.candidate for v in undecided_}
    names |= {v.versus or next(c.against for c in cands if c.name == v.candidate) for v in undecided_}
    # (the "only +y% over the baseline" case: versus the baseline - its reference is already decided)
    return [c for c in cands if c.name in names]


def run_trials(base_args: dict[str, Any], plan: Plan, *, out_dir: Path, reps: int = 2, max_reps: int | None = None,
               steps: int | str = "auto", base_env: dict[str, str] | None = None,
               log: Callable[[str], None] = lambda m: None, command: list[str] | None = None,
               trial: Callable[..., TrialRun] | None = None, planned_images: float | None = None,
               seed: int = 0, cands: list[Candidate] | None = None) -> TrialReport:
    """``command``: a script-mode run; each trial runs the program unedited with the candidate's arguments
    merged into its trainers (profiling/inject). ``max_reps`` (default ``reps``): repeats a candidate held back by
    noise alone may reach. ``trial(candidate, rep, run_dir)``: runs one trial (default: a bounded profile, repeat
    ``rep`` with seed ``seed + rep``, so that the repeats of unchanged training measure how much its loss varies).
    ``planned_images``: the user's training's images, against which one-off costs are weighed (judge)."""
    if reps < 1:
        raise ValueError(f"reps must be at least 1, not {reps}")
    out_dir.mkdir(parents=True, exist_ok=True)
    one = trial or (lambda c, rep, run_dir: _profile_trial(c, rep, run_dir, base_args, steps, base_env, command,
                                                           seed + rep))
    return rounds(cands if cands is not None else candidates(plan), one, reps=reps, max_reps=max_reps, out_dir=out_dir, log=log,
                  planned_images=planned_images)


def rounds(cands: list[Candidate], one: Callable[..., TrialRun], *, reps: int, max_reps: int | None = None,
           out_dir: Path = Path("."), log: Callable[[str], None] = lambda m: None,
           planned_images: float | None = None) -> TrialReport:
    """The trials' rounds: every candidate ``reps`` times, then one round at a time for what is undecided, up to
    ``max_reps``; ``one(candidate, rep, run_dir)`` runs a trial (or replays a recorded one)."""
    runs: list[TrialRun] = []
    todo, rep, settled = cands, 0, set()
    t0 = time.monotonic()
    while todo:
        # interleaved ABBA: B c1 ... P, then P ... c1 B, so that a steady drift of the machine (or a position effect
        # such as the page cache a previous trial warmed) falls on every candidate alike
        for c in (todo if rep % 2 == 0 else todo[::-1]):
            log(f"trial {rep + 1}/{reps if rep < reps else max_reps}: {c.name}")
            runs.append(one(c, rep, out_dir / f"{_slug(c.name)}-{rep + 1}"))
        rep += 1
        moved = {n: why for n, why in loss_settled(runs, cands).items() if n not in settled}
        if moved:
            log(f"not repeated, the loss settles them: {'; '.join(f'{n} ({why})' for n, why in moved.items())}")
            settled |= set(moved)
        if rep < reps:
            todo = [c for c in todo if c.name not in settled]
            continue
        verdicts, spread, kept, noise = judge(runs, cands, planned_images)
        todo = [c for c in undecided(verdicts, cands) if c.name not in settled] if rep < (max_reps or reps) else []
        if todo:
            log(f"more repeats to decide {', '.join(v.candidate for v in verdicts if v.inconclusive)}: within the "
                "noise so far")
    return TrialReport(runs, verdicts, spread, kept, noise, round(time.monotonic() - t0, 1))  # judged after the last


def _profile_trial(c: Candidate, rep: int, run_dir: Path, base_args: dict[str, Any], steps: int | str,
                   base_env: dict[str, str] | None, command: list[str] | None, seed: int) -> TrialRun:
    from yolodoctor.errors import Interrupted
    from yolodoctor.profiling.runner import run_profile, stopped_by_signal

    run, prof = run_profile(None if command else dict(base_args), command=command, overrides={**c.args, "seed": seed},
                            steps=steps,
                            out=run_dir, trace=False, loader_seconds=0, env_extra={**(base_env or {}), **c.env},
                            torch_flags=c.torch_flags)
    if (code := stopped_by_signal(prof)) is not None:  # Ctrl-C / SIGTERM: no further trials
        raise Interrupted(f"{prof.reason}: fix --verify stopped; the trial so far is saved in {run}", code)
    s = prof.summary or {}
    w = s.get("window") or {}
    return TrialRun(c.name, rep, str(run), prof.status, prof.reason,
                    s.get("images_per_s"), w.get("valid"),
                    mismatches(c.args, prof.settings or {}), _loss_curve(run),
                    ((prof.host_probe or {}).get("before") or {}).get("python_ms"), w.get("why"), s.get("one_off_s"),
                    seed, s.get("phases"))


def _steps(par: dict[str, Any]) -> str:
    """The optimizer steps behind a loss comparison: a few steps from scratch are the start of training, not its
    rate."""
    a, b = par.get("opt_steps") or (None, None)
    return f"{b} optimizer steps against {a}" if a is not None else "optimizer steps not counted"


def _loss_curve(run: Path) -> list[tuple[int, float]] | None:
    from yolodoctor.profiling.events import read_events
    from yolodoctor.profiling.summary import steps_of

    try:
        steps = sorted((e for e in steps_of(read_events(run / "events.jsonl")) if e.get("train_index", 0) == 0),
                       key=lambda e: e["step"])
    except (OSError, ValueError, KeyError):
        return None
    return opt_points(steps) or None


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)[:60]
