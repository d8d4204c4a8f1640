"""`fix --verify`'s judge: a verdict on each candidate from its trials, the changes kept, and what more repeats could
decide.

A change is kept when its median images/s beats its reference's by more than the noise threshold (Noise.threshold)
and in the pairs of repeats (pairs_won), its trials and its reference's ran cleanly and as asked, its loss passes
(loss parity for a change to training, no breakage otherwise) and, over the planned training, it saves wall time.
Why these rules: docs/verification.md.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from yolodoctor.fixing.candidates import Candidate, same_changes
from yolodoctor.fixing.parity import BROKEN, SAFE_FLOOR, LossParity, parity, t975
from yolodoctor.fixing.planner import Change
from yolodoctor.fixing.records import CandidateVerdict, TrialRun

MIN_GAIN = 0.03
PAIRS_WON = 0.8
CLEAR = 2.0  # a loss worse than unchanged training's by this many times its band is not repeated (loss_settled)
DECIDE_MAX = 20  # more repeats of each than this to tell a gain from the noise: not worth a user's GPU time


@dataclass(frozen=True)
class Noise:
    """The machine's run-to-run noise in a set of trials: relative standard deviation of repeats, pooled over the
    configurations that ran two or more times cleanly, and its degrees of freedom."""
    deviation: float | None
    df: int

    @classmethod
    def of(cls, groups: list[list[float]]) -> Noise:
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


def _ok(rs: list[TrialRun]) -> list[float]:
    return [r.images_per_s for r in rs if r.images_per_s and r.status == "complete"]


@dataclass
class _Trials:
    """What every verdict of one set of trials reads: the runs by candidate, the baseline's, the noise and the loss
    references."""

    by: dict[str, list[TrialRun]]
    base: list[float]  # the baseline's clean images/s
    base_med: float | None
    noise: Noise
    safe_par: dict[str, LossParity | None]  # training-equivalent candidates' loss against unchanged training's
    unchanged: list[list[tuple[int, float]]]  # the loss curves of unchanged training
    moved: set[str]  # training-equivalent candidates whose loss broke away
    planned_images: float | None


@dataclass
class _Measured:
    """One candidate's trials as its verdict reads them."""

    c: Candidate
    rs: list[TrialRun]
    ok: list[float]  # clean images/s of its repeats
    med: float | None
    ref_vals: list[float]  # its reference's
    limit: float  # the noise threshold over its reference
    base_limit: float  # ... and over the baseline
    gain: float | None  # over its reference
    alters: bool  # an unsafe change: faster is not enough
    par: LossParity | None  # its loss parity
    need: float  # the share of pairs of repeats it must win
    cost: tuple[float, float, float] | None  # _wall's estimate over the planned training


@dataclass
class _Outcome:
    why: str
    keep: bool = False
    held: bool = False  # undecided: more repeats could decide
    versus: str | None = None  # what it is undecided against, where not its reference
    rejected: bool = False


def _measure(c: Candidate, t: _Trials) -> _Measured:
    rs = t.by[c.name]
    ok = _ok(rs)
    med = statistics.median(ok) if ok else None
    ref_vals = t.base if c.against == "baseline" else _ok(t.by.get(c.against, []))
    ref = statistics.median(ref_vals) if ref_vals else None
    alters = bool(altering(c))
    # as loss_settled reads them; a change that only reschedules training (a batch within nbs) is held to the band of
    # changes to training, never below SAFE_FLOOR, and may be judged on one reference run's curve
    par = (parity(t.unchanged, _curves(rs), **({} if _unsafe(c) else {"floor": SAFE_FLOOR})) if alters
           else t.safe_par.get(c.name))
    return _Measured(c, rs, ok, med, ref_vals, t.noise.threshold(ok, ref_vals), t.noise.threshold(ok, t.base),
                     med / ref - 1 if med and ref else None, alters, par, _need(ok, ref_vals),
                     _wall(t.by, c, t.planned_images))


def reschedules(x: Change) -> bool:
    """A batch change: BatchNorm normalises over another batch, and over the warm-up (min(warmup_epochs, epochs - 1)
    epochs in 8.4) Ultralytics ramps ``accumulate`` from 1 to nbs / batch, so another batch takes another number of
    optimizer steps there. Within nbs it is safe to apply (the optimisation's nominal batch is unchanged), but its
    loss is another schedule's: judged as a change to training, never as a breakage."""
    return x.kind == "args" and x.key == "batch" and x.before != x.after and not x.changes_training


def needs_trial(x: Change) -> str | None:
    """Why a change is applied only after a trial (None: it may be applied unverified): a change to training or to its
    schedule (its loss only a trial can judge), or compilation (its one-off compile time, and CUDA graphs' own
    constraints - the batch shape they were planned with, outputs overwritten between replays - show only when it
    runs; a training too short to verify is too short to repay it)."""
    if x.changes_training or reschedules(x):
        return "it changes training or its schedule; a trial checks its loss"
    if x.kind == "args" and x.key == "compile" and x.after not in (None, False, "False", "false"):
        return "compilation costs a one-off time and can fail only when it runs"
    return None


def _unsafe(c: Candidate) -> bool:
    return any(x.changes_training for x in c.changes)


def _alteration(c: Candidate) -> str:
    if any(x.changes_training for x in c.changes):
        return "it changes training"
    b = next(x for x in c.changes if reschedules(x))
    return f"batch {b.after} trains on another schedule than batch {b.before}"


def altering(c: Candidate) -> list[Change]:
    """The candidate's changes to what is optimised: those that change training, and those that reschedule it."""
    return [x for x in c.changes if x.changes_training or reschedules(x)]


def _reference_trouble(c: Candidate, t: _Trials) -> str | None:
    """Why the candidate's reference (other than the baseline) did not run cleanly, if it did not."""
    ref_rs = t.by.get(c.against, []) if c.against != "baseline" else []
    return next((f"trial failed: {r.reason}" if r.status != "complete" else
                 f"what ran is not what was asked: {r.mismatch[0]}" for r in ref_rs
                 if r.status != "complete" or r.mismatch), None)


def _loss_broke(m: _Measured) -> _Outcome | None:
    """Rejected where its loss fails: loss parity for a change to training, breakage for one meant to keep it."""
    par, alters = m.par, m.alters
    if par is None or (par.within if alters else not par.broken):
        return None
    c = m.c
    over = "" if c.against == "baseline" else f" over {c.against}"
    resched = [x for x in c.changes if reschedules(x)]
    what = ("it changes training and its loss is {:+.1%} against unchanged training's" if alters and not resched
            else "its loss is {:+.1%} against unchanged training's").format(par.rel)
    if resched and all(reschedules(x) or not x.changes_training for x in c.changes):
        b = resched[0]
        what = (f"batch {b.after} trains on another schedule (BatchNorm over {b.after} images, not {b.before}; the "
                "warm-up's ramp of accumulate gives another number of optimizer steps), and its loss is "
                f"{par.rel:+.1%} against unchanged training's")
    band = f"band {par.band:.1%}" if alters else f"{BROKEN:.0f} x the band {par.band:.1%}"
    why = f"{m.gain:+.1%}{over}, but {what} after {par.images} images ({_steps(par)}; {band})"
    if not alters:
        why += ": a change meant to keep training broke it"
    return _Outcome(why, rejected=True)


def _not_judged(m: _Measured, t: _Trials) -> _Outcome | None:
    """Why the candidate's speed cannot make it kept, whatever it is: its trials or its reference's did not run
    cleanly, nothing was measured, the window was too short, or its loss fails (no repeat makes it learn)."""
    c, rs = m.c, m.rs
    failed = [r for r in rs if r.status != "complete"]
    mism = sorted({x for r in rs for x in r.mismatch})
    ref_bad = _reference_trouble(c, t)
    if failed:
        return _Outcome(f"trial failed: {failed[0].reason}", rejected=True)
    if mism:
        return _Outcome(f"what ran is not what was asked: {mism[0]}", rejected=True)
    if ref_bad:  # what it is measured over (and would bring in) did not run cleanly
        return _Outcome(f"its reference {c.against} did not run cleanly ({ref_bad})")
    if c.against in t.moved:  # ... or broke the loss: keeping this would bring that change in
        return _Outcome(f"its reference {c.against} was rejected: its loss broke away from unchanged training's")
    if m.gain is None:
        return _Outcome("no throughput measured")
    if short := next((r for r in rs if r.window_valid is False), None):
        return _Outcome(f"window too short to conclude: {short.window_why or 'no steady window'}", rejected=True)
    return _loss_broke(m)


def _held_back(m: _Measured, t: _Trials) -> _Outcome | None:
    """Why a candidate faster than its reference beyond the noise is still not kept: not beyond it over the
    baseline, not in enough pairs of repeats, a loss that cannot be judged, or a one-off cost the planned training
    does not earn back."""
    c, gain, par, cost, ok, ref_vals = m.c, m.gain, m.par, m.cost, m.ok, m.ref_vals
    assert gain is not None and m.med is not None  # _not_judged turned the rest away
    if c.against != "baseline" and t.base_med and m.med / t.base_med - 1 <= m.base_limit:
        over_base = m.med / t.base_med - 1
        return _Outcome(f"{gain:+.1%} over {c.against}, but only {over_base:+.1%} over the baseline "
                        f"(threshold {m.base_limit:.1%})",
                        held=over_base > MIN_GAIN, versus="baseline")  # undecided against the baseline: run it
    if len(ref_vals) >= 2 and pairs_won(ok, ref_vals) < m.need:
        return _Outcome((f"{gain:+.1%} median, but its slowest repeat ({min(ok):.1f}) does not beat the fastest of "
                         f"{c.against} ({max(ref_vals):.1f})") if m.need == 1.0 else
                        (f"{gain:+.1%} median, but it is faster than {c.against} in only "
                         f"{pairs_won(ok, ref_vals):.0%} of the pairs of repeats (needs {m.need:.0%})"), held=True)
    if m.alters and _unsafe(c) and par is None:
        return _Outcome(f"{gain:+.1%}, but {_alteration(c)} and its loss could not be compared with "
                        "unchanged training's (too few optimizer steps after the same images)", rejected=True)
    if m.alters and _unsafe(c) and par is not None and par.band_from != "runs":
        return _Outcome(f"{gain:+.1%}, but {_alteration(c)} and only one run of unchanged training "
                        f"reaches its {par.images} images: how much another seed moves the loss is not "
                        "measured (the curve's own scatter understates it), so its loss cannot be judged; "
                        "--reps 2 or more runs the baseline with another seed", rejected=True)
    if cost and cost[1] <= 0:
        return _Outcome(f"{gain:+.1%} in steady state, but over the planned training ({t.planned_images:.0f} "
                        f"images) its one-off {cost[2]:.0f} s costs more than it saves: about {cost[0]:.0f} s "
                        f"against {cost[0] + cost[1]:.0f} s")
    return None


def _kept(m: _Measured, t: _Trials) -> _Outcome:
    c, gain, par, cost = m.c, m.gain, m.par, m.cost
    over = "" if c.against == "baseline" else f" over {c.against}"
    why = f"{gain:+.1%}{over} beats the noise threshold {m.limit:.1%}"
    if cost:
        why += (f"; saves about {cost[1]:.0f} s over the planned training ({t.planned_images:.0f} images), "
                f"one-off {cost[2]:.0f} s included")
    if par is None and m.alters:
        why += "; its loss could not be compared (too few optimizer steps after the same images)"
    if par is not None and m.alters:
        why += (f"; loss {par.rel:+.1%} against unchanged training's after {par.images} images "
                f"({_steps(par)}), within {par.band:.1%}")
    return _Outcome(why, keep=True)


def _outcome(m: _Measured, t: _Trials) -> _Outcome:
    out = _not_judged(m, t)
    if out is not None:
        return out
    assert m.gain is not None  # _not_judged turned away a candidate with no throughput
    if m.gain <= m.limit:
        return _Outcome(f"{m.gain:+.1%} is within the noise threshold {m.limit:.1%}", held=m.gain > MIN_GAIN)
    return _held_back(m, t) or _kept(m, t)


def _verdict(c: Candidate, t: _Trials) -> CandidateVerdict:
    m = _measure(c, t)
    out = _outcome(m, t)
    why, par = out.why, m.par
    if par is not None and not m.alters and par.moved and not out.rejected:
        why += f"; its loss moved {par.rel:+.1%} (band {par.band:.1%}), as expected: {moved_cause(c)}"
    return CandidateVerdict(c.name, m.med, len(m.rs), m.gain, out.keep, why, par, inconclusive=out.held,
                            versus=out.versus, rejected=out.rejected,
                            to_decide=_to_decide(t.noise, out.held, m.ok,
                                                 t.base if out.versus == "baseline" else m.ref_vals),
                            planned_s=m.cost[0] if m.cost else None, saved_s=m.cost[1] if m.cost else None)


def _merge_kept(cands: list[Candidate], verdicts: list[CandidateVerdict]) -> list[Change]:
    """The kept changes: kept candidates merged fastest first, each whole or not at all - one that sets a key to
    another value than a faster one did is left out with everything it brings (a change comes with the requirements
    it ran with: no batch=32 under a compile that was measured at batch 128); not the whole sets here (the plan and
    its safe part come in measured together; an unsafe change and its safe fallback may both pass: the faster holds
    the key)."""
    chosen: dict[tuple[str, str], Change] = {}
    ranked = sorted(((v, c) for c, v in zip(cands[1:], verdicts[1:], strict=False) if v.kept and not c.whole),
                    key=lambda vc: -(vc[0].median or 0.0))
    for _, c in ranked:
        if all(chosen.get((x.kind, x.key), x) is x for x in c.changes):
            chosen.update({(x.kind, x.key): x for x in c.changes})
    kept: list[Change] = []
    for c in cands:  # in candidate order
        kept.extend(x for x in c.changes if chosen.get((x.kind, x.key)) is x and all(x is not y for y in kept))
    return kept


def judge(runs: list[TrialRun], cands: list[Candidate], planned_images: float | None = None
          ) -> tuple[list[CandidateVerdict], float | None, list[Change], Noise]:
    """The verdicts, the baseline's spread, the kept changes and the noise. ``planned_images``: the images the user's
    training will process (epochs x images per epoch); with it, a change faster in steady state is kept only where
    its one-off cost (filling a cache, compiling: TrialRun.one_off_s) leaves time saved over that training."""
    by: dict[str, list[TrialRun]] = {c.name: [r for r in runs if r.candidate == c.name] for c in cands}
    base = _ok(by["baseline"])
    base_med = statistics.median(base) if base else None
    spread = (max(base) - min(base)) / base_med if len(base) >= 2 and base_med else None
    noise = Noise.of([_ok(rs) for rs in by.values() if not any(r.mismatch for r in rs)])
    safe_par, unchanged = _loss_references(by, cands)
    t = _Trials(by, base, base_med, noise, safe_par, unchanged, _moved(safe_par), planned_images)
    verdicts = []
    for c in cands:
        if c.name == "baseline":
            med = statistics.median(base) if base else None
            verdicts.append(CandidateVerdict(c.name, med, len(by[c.name]), 0.0 if med else None, False,
                                             f"spread of repeats {spread:.1%}" if spread is not None else "one repeat"))
        else:
            verdicts.append(_verdict(c, t))
    kept = _merge_kept(cands, verdicts)
    if (combo := _trialled_combination(cands, kept)) is not None:
        return verdicts, spread, _combination(by, cands, verdicts, combo, noise), noise
    whole = _measured_together(by, cands, verdicts, kept, noise)
    for c, v in zip(cands[1:], verdicts[1:], strict=False):  # a whole set is kept only where it is what gets applied
        if c.whole and c is not whole and v.kept:
            v.kept = False
            if "not applied whole" not in v.why:
                v.why += (f"; not applied: {whole.name} is applied whole" if whole is not None else
                          "; not applied whole: no candidate holds exactly the kept changes, to measure it against")
    if whole is None:
        return verdicts, spread, kept, noise
    for c, v in zip(cands[1:], verdicts[1:], strict=False):  # decided by the whole: no more repeats for what it holds
        if v.inconclusive and all(any(x is y for y in whole.changes) for x in c.changes):
            v.inconclusive, v.to_decide = False, None
    return verdicts, spread, list(whole.changes), noise


COMBINATION = "together"  # the name's prefix of the candidate that trials kept changes measured apart


def unmeasured(cands: list[Candidate], kept: list[Change]) -> Candidate | None:
    """The kept changes as one candidate to trial, where they came from several candidates and none measured them
    together (what is applied must be what was measured); None where one did, or one change is kept."""
    if len(kept) < 2 or any(same_changes(c.changes, kept) for c in cands):
        return None
    return Candidate(f"{COMBINATION}:" + "+".join(f"{c.key}={c.after}" for c in kept), list(kept), whole=True)


def _trialled_combination(cands: list[Candidate], kept: list[Change]) -> Candidate | None:
    return next((c for c in cands if c.name.startswith(f"{COMBINATION}:") and same_changes(c.changes, kept)), None)


def _combination(by: dict[str, list[TrialRun]], cands: list[Candidate], verdicts: list[CandidateVerdict],
                 combo: Candidate, noise: Noise) -> list[Change]:
    """What is applied once the kept changes were trialled together: all of them where together they beat the fastest
    kept candidate beyond the noise (and the baseline: the combination's own verdict), else that candidate's changes
    alone. The combination's verdict says which, and why."""
    v = verdicts[cands.index(combo)]
    single = max(((c, x) for c, x in zip(cands[1:], verdicts[1:], strict=False) if x.kept and not c.whole),
                 key=lambda cx: cx[1].median or 0.0)
    best, _ = single
    ok, ref = _ok(by[combo.name]), _ok(by[best.name])
    gain = (statistics.median(ok) / statistics.median(ref) - 1) if ok and ref else None
    limit = noise.threshold(ok, ref) if ok and ref else None
    if v.kept and gain is not None and limit is not None and gain > limit and pairs_won(ok, ref) >= _need(ok, ref):
        v.why += f"; applied: together {gain:+.1%} over {best.name} alone beats the noise threshold {limit:.1%}"
        return list(combo.changes)
    v.kept = False
    v.inconclusive, v.to_decide = False, None
    together = (f"together {gain:+.1%} over {best.name} alone, within the noise threshold {limit:.1%}"
                if gain is not None and limit is not None else "together they did not run cleanly")
    v.why += f"; not applied: {together}, so {best.name} is applied alone"
    return list(best.changes)


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
        one_off = statistics.median([r.one_off_s for r in ok if r.one_off_s is not None])
        rate = statistics.median([r.images_per_s for r in ok if r.images_per_s])
        return one_off + planned_images / rate, one_off

    mine, ref = estimate(by.get(c.name, [])), estimate(by.get(c.against, []))
    if mine is None or ref is None:
        return None
    return mine[0], ref[0] - mine[0], mine[1]


def _steps(par: LossParity) -> str:
    """The optimizer steps behind a loss comparison: a few steps from scratch are the start of training, not its
    rate."""
    a, b = par.opt_steps or (None, None)
    return f"{b} optimizer steps against {a}" if a is not None else "optimizer steps not counted"


def _loss_references(by: dict[str, list[TrialRun]], cands: list[Candidate]
                     ) -> tuple[dict[str, LossParity | None], list[list[tuple[int, float]]]]:
    """Each training-equivalent candidate's loss parity against the other unchanged-training runs (leave-one-out,
    SAFE_FLOOR under the band; ``broken`` where worse by more than BROKEN x the band, ``moved`` beyond the band), and
    the loss curves of unchanged training: the baseline's and those of the candidates not broken."""
    safe = [c for c in cands if not altering(c)]
    curves = {c.name: _curves(by[c.name]) for c in safe}
    safe_par: dict[str, LossParity | None] = {}
    for c in safe:
        if c.name == "baseline":
            continue
        others = [cv for o in safe if o.name != c.name for cv in curves[o.name]]
        p = parity(others, curves[c.name], floor=SAFE_FLOOR)
        if p is not None:
            p.broken = p.rel > BROKEN * p.band
            p.moved = abs(p.rel) > p.band
        safe_par[c.name] = p
    broken = _moved(safe_par)
    return safe_par, [curve for c in safe if c.name not in broken for curve in curves[c.name]]


def _moved(safe_par: dict[str, LossParity | None]) -> set[str]:
    """The training-equivalent candidates whose loss broke away from unchanged training's."""
    return {n for n, p in safe_par.items() if p is not None and p.broken}


# why a training-equivalent change's loss curve moves, where it does (read in Ultralytics 8.4 and torch)
MOVED_CAUSE = {
    "workers": "each loader worker draws its own augmentation random stream, so another worker count trains on other "
               "augmentations, as another seed does",
    "cache": "in detection, Ultralytics' RAM-cache check reads 30 random images (data/base.py check_cache_ram), "
             "shifting every later augmentation, and the cache turns the mosaic buffer off (mosaic then picks from the "
             "whole dataset); a classification cache holds the same pixels, so there the loss moves by noise alone",
    "batch": "another batch size groups the images differently",
    "deterministic": "non-deterministic kernels sum in another order",
    "compile": "compiled kernels sum in another order",
}


def moved_cause(c: Candidate) -> str:
    keys = [x.key.split(".")[0] for x in c.changes]
    causes = [MOVED_CAUSE[k] for k in dict.fromkeys(keys) if k in MOVED_CAUSE]
    return "; ".join(causes) or "floating-point sums in another order"


def loss_settled(runs: list[TrialRun], cands: list[Candidate]) -> dict[str, str]:
    """Name -> why, for each candidate that changes training whose loss is already worse than unchanged training's
    by more than CLEAR x its band: no more repeats can make it kept."""
    by = {c.name: [r for r in runs if r.candidate == c.name] for c in cands}
    if not by.get("baseline"):
        return {}
    _, unchanged = _loss_references(by, cands)
    out = {}
    for c in cands:
        if altering(c) and (p := parity(unchanged, _curves(by[c.name]),
                                        **({} if _unsafe(c) else {"floor": SAFE_FLOOR}))) is not None \
                and p.rel > CLEAR * p.band:
            out[c.name] = f"loss {p.rel:+.1%} against unchanged training's after {p.images} images, band {p.band:.1%}"
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


def _measured_together(by: dict[str, list[TrialRun]], cands: list[Candidate], verdicts: list[CandidateVerdict],
                       kept: list[Change], noise: Noise) -> Candidate | None:
    """The fastest kept candidate that holds every kept change and more and beats the candidate holding exactly the
    kept ones (the baseline where none was kept) beyond the noise and in the pairs; one that is faster only within
    the noise is marked undecided against it (its verdict says so), for more repeats. None where no candidate holds
    exactly the kept changes (merged from several candidates): there is nothing measured to compare with."""
    ref = next((c for c in cands if same_changes(c.changes, kept)), None)
    if ref is None:
        return None
    ref_vals = _ok(by[ref.name])
    if not ref_vals:
        return None
    # a change whose own candidate was rejected - a failed or mismatched trial, no window (the change it tries, its
    # last), a failed loss parity (the changes that change training, not the safe ones beside them) - does not come
    # in with a faster whole
    def blamed(c: Candidate) -> list[Change]:
        clean = all(r.status == "complete" and not r.mismatch and r.window_valid is not False for r in by[c.name])
        alters = altering(c)
        return alters if clean and alters else [c.changes[-1]]

    rejected = [x for c, v in zip(cands[1:], verdicts[1:], strict=False)
                if v.rejected and not c.whole for x in blamed(c)]
    ref_med = statistics.median(ref_vals)
    best: Candidate | None = None
    best_med = 0.0
    for c, v in zip(cands[1:], verdicts[1:], strict=False):
        if not v.kept or v.median is None or c is ref or not all(any(x is y for y in c.changes) for x in kept):
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


def undecided(verdicts: list[CandidateVerdict], cands: list[Candidate]) -> list[Candidate]:
    """The candidates to run once more: each one held back by noise alone, with what it is undecided against (its
    reference, the baseline only where that is it; for the whole plan, the kept changes' candidate)."""
    undecided_ = [v for v in verdicts if v.inconclusive]
    names = {v.candidate for v in undecided_}
    names |= {v.versus or next(c.against for c in cands if c.name == v.candidate) for v in undecided_}
    # (the "only +y% over the baseline" case: versus the baseline - its reference is already decided)
    return [c for c in cands if c.name in names]
