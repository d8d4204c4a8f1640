"""`fix --verify`: short A/B trials on the user's own dataset and pipeline, interleaved and repeated.

Each trial is a bounded `profile` of the real training (same dataset, augmentation, epochs - hence the same mosaic
and warm-up phase - as the run being fixed) with the default step rule, whose steady window is longer than the
loader's prefetch queue. The baseline, each change alone and the whole plan run in turn, in ABBA order (B c1 c2 ... P,
then P ... c2 c1 B), so drift of the machine hits them alike. A change is kept when its median images/s beats the baseline's by more
than NOISE_FACTOR times the larger of the two configurations' own spreads (and at least MIN_GAIN), its slowest
repeat beats the baseline's fastest (ranges do not overlap), every one of its trials completed, and what ran is what was asked (no batch halved after OOM, no
compile fallen back to eager). Each trial's profile times the host's own speed just before it (profiling/hostprobe:
a fixed Python loop); `host_spread` says how much the machine itself moved across the trials, which a shared machine does.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from yolodoctor.fixing.parity import opt_points, parity
from yolodoctor.fixing.planner import Change, ChangeSet, Plan
from yolodoctor.profiling import hostprobe

MIN_GAIN = 0.03
NOISE_FACTOR = 2.0  # with two or three repeats a spread is a rough estimate: demand a clear margin over it


@dataclass
class Candidate(ChangeSet):
    name: str
    changes: list[Change]
    against: str = "baseline"  # the candidate its gain is measured over (the one holding what it requires)


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


@dataclass
class Verdict:
    candidate: str
    median: float | None
    runs: int
    gain: float | None  # ratio to the baseline median, minus 1
    kept: bool
    why: str
    parity: dict[str, Any] | None = None  # loss against the baseline, for candidates that change training


@dataclass
class TrialReport:
    runs: list[TrialRun]
    verdicts: list[Verdict]
    baseline_spread: float | None
    kept: list[Change]

    @property
    def host_spread(self) -> float | None:
        """How much the host's own speed moved across the trials (slowest / fastest probe loop - 1)."""
        return hostprobe.moved([r.host_ms for r in self.runs])

    def to_dict(self) -> dict[str, Any]:
        return {"runs": [{k: v for k, v in asdict(r).items() if k != "loss_curve"} for r in self.runs],
                "verdicts": [asdict(v) for v in self.verdicts],
                "baseline_spread": self.baseline_spread, "host_spread": self.host_spread,
                "kept": [c.to_dict() for c in self.kept]}


def candidates(plan: Plan) -> list[Candidate]:
    """The baseline, each change alone, the safe fallbacks of unsafe changes, and the whole plan. A change that
    ``requires`` others (compile with CUDA graphs needs the batch change that ends gradient accumulation; workers
    sized for a bigger batch need it) is tried on top of them, followed transitively, and judged against them."""
    out = [Candidate("baseline", [])]
    for c in plan.changes:
        needs = _required(c, plan.changes)
        if needs:
            base = Candidate("+".join(f"{d.key}={d.after}" for d in needs), needs)
            out.append(Candidate(f"{base.name}+{c.key}={c.after}", [*needs, c],
                                 against=base.name if len(needs) == 1 else "baseline"))
        else:
            out.append(Candidate(f"{c.key}={c.after}", [c]))
    out += [Candidate(f"{c.key}={c.after}", [c]) for c in plan.fallbacks
            if f"{c.key}={c.after}" not in {x.name for x in out}]
    if len(plan.changes) > 1 and all(len(c.changes) < len(plan.changes) for c in out):
        out.append(Candidate("plan", list(plan.changes)))
    return out


def _required(c: Change, changes: list[Change], seen: tuple = ()) -> list[Change]:
    """The changes ``c`` requires, and theirs, in plan order (a cycle stops where it closes)."""
    out: list[Change] = []
    for d in changes:
        if d is not c and d.key in c.requires and d.key not in seen:
            for x in [*_required(d, changes, (*seen, c.key)), d]:
                if all(x is not y for y in out):
                    out.append(x)
    return out


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


def judge(runs: list[TrialRun], cands: list[Candidate]) -> tuple[list[Verdict], float | None, list[Change]]:
    by: dict[str, list[TrialRun]] = {c.name: [r for r in runs if r.candidate == c.name] for c in cands}
    base = [r.images_per_s for r in by["baseline"] if r.images_per_s and r.status == "complete"]
    base_med = statistics.median(base) if base else None
    spread = (max(base) - min(base)) / base_med if len(base) >= 2 and base_med else None
    base_threshold = max(NOISE_FACTOR * (spread or 0.0), MIN_GAIN)
    verdicts, kept = [], []
    for c in cands:
        rs = by[c.name]
        ok = [r.images_per_s for r in rs if r.images_per_s and r.status == "complete"]
        med = statistics.median(ok) if ok else None
        own = (max(ok) - min(ok)) / med if len(ok) >= 2 and med else 0.0
        threshold = max(base_threshold, NOISE_FACTOR * own)
        ref, ref_vals = base_med, base
        if c.against != "baseline":  # judged over the candidate holding what it requires
            ref_ok = [r.images_per_s for r in by.get(c.against, []) if r.images_per_s and r.status == "complete"]
            ref, ref_vals = (statistics.median(ref_ok) if ref_ok else None), ref_ok
            if len(ref_ok) >= 2 and ref:
                threshold = max(threshold, NOISE_FACTOR * (max(ref_ok) - min(ref_ok)) / ref)
        gain = med / ref - 1 if med and ref else None
        if c.name == "baseline":
            verdicts.append(Verdict(c.name, med, len(rs), 0.0 if med else None, False,
                                    f"spread of repeats {spread:.1%}" if spread is not None else "one repeat"))
            continue
        failed = [r for r in rs if r.status != "complete"]
        mism = sorted({m for r in rs for m in r.mismatch})
        alters = any(x.changes_training for x in c.changes)  # an unsafe change: faster is not enough (DESIGN.md 3)
        par = None
        if alters:
            par = parity([r.loss_curve or [] for r in by["baseline"] if r.status == "complete"],
                         [r.loss_curve or [] for r in rs if r.status == "complete"])
        if failed:
            why, keep = f"trial failed: {failed[0].reason}", False
        elif mism:
            why, keep = f"what ran is not what was asked: {mism[0]}", False
        elif gain is None:
            why, keep = "no throughput measured", False
        elif any(r.window_valid is False for r in rs):
            why, keep = "window too short to conclude", False
        elif gain > threshold and c.against != "baseline" and base_med and med / base_med - 1 <= base_threshold:
            why, keep = (f"{gain:+.1%} over {c.against}, but only {med / base_med - 1:+.1%} over the baseline "
                         f"(threshold {base_threshold:.1%})"), False
        elif gain > threshold and len(ref_vals) >= 2 and min(ok) <= max(ref_vals):
            why, keep = (f"{gain:+.1%} median, but its slowest repeat ({min(ok):.1f}) does not beat the fastest of "
                         f"{c.against} ({max(ref_vals):.1f})"), False
        elif gain > threshold and alters and par is None:
            why, keep = (f"{gain:+.1%}, but it changes training and its loss could not be compared with the "
                         "baseline's (too few optimizer steps after the same images)"), False
        elif gain > threshold and par is not None and not par["within"]:
            why, keep = (f"{gain:+.1%}, but it changes training and its loss is {par['rel']:+.1%} against the "
                         f"baseline's after {par['images']} images (band {par['band']:.1%})"), False
        elif gain > threshold:
            over = "" if c.against == "baseline" else f" over {c.against}"
            why, keep = f"{gain:+.1%}{over} beats the noise threshold {threshold:.1%}", True
            if par is not None:
                why += (f"; loss {par['rel']:+.1%} against the baseline's after {par['images']} images, "
                        f"within {par['band']:.1%}")
        else:
            why, keep = f"{gain:+.1%} is within the noise threshold {threshold:.1%}", False
        verdicts.append(Verdict(c.name, med, len(rs), gain, keep, why, par))
    # the kept changes: those of the fastest kept candidate holding each key (an unsafe change and its safe
    # fallback may both pass; a change comes with what it requires), never the "plan" candidate's wholesale
    won: dict[tuple[str, str], tuple[float, Candidate]] = {}
    for c, v in zip((c for c in cands if c.name != "baseline"), verdicts[1:]):
        if v.kept and c.name != "plan":
            for x in c.changes:
                if (x.kind, x.key) not in won or v.median > won[(x.kind, x.key)][0]:
                    won[(x.kind, x.key)] = (v.median, c)
    for c in cands:
        if any(w is c for _, w in won.values()):
            kept.extend(x for x in c.changes if won[(x.kind, x.key)][1] is c and all(x is not y for y in kept))
    return verdicts, spread, kept


def run_trials(base_args: dict[str, Any], plan: Plan, *, out_dir: Path, reps: int = 2, steps: int | str = "auto",
               base_env: dict[str, str] | None = None, log: Callable[[str], None] = lambda m: None,
               command: list[str] | None = None) -> TrialReport:
    """``command``: a script-mode run; each trial runs the program unedited with the candidate's arguments
    merged into its trainers (profiling/inject)."""
    from yolodoctor.errors import Interrupted
    from yolodoctor.profiling.runner import run_profile, stopped_by_signal

    cands = candidates(plan)
    out_dir.mkdir(parents=True, exist_ok=True)
    runs: list[TrialRun] = []
    for rep in range(reps):
        # interleaved ABBA: B c1 ... P, then P ... c1 B, so that a steady drift of the machine (or a position effect
        # such as the page cache a previous trial warmed) falls on every candidate alike
        for c in (cands if rep % 2 == 0 else cands[::-1]):
            log(f"trial {rep + 1}/{reps}: {c.name}")
            run, prof = run_profile(None if command else dict(base_args), command=command, overrides=c.args,
                                    steps=steps, out=out_dir / f"{_slug(c.name)}-{rep + 1}", trace=False,
                                    loader_seconds=0, env_extra={**(base_env or {}), **c.env},
                                    torch_flags=c.torch_flags)
            if (code := stopped_by_signal(prof)) is not None:  # Ctrl-C / SIGTERM: no further trials
                raise Interrupted(f"{prof.reason}: fix --verify stopped; the trial so far is saved in {run}", code)
            s = prof.summary or {}
            runs.append(TrialRun(c.name, rep, str(run), prof.status, prof.reason, s.get("images_per_s"),
                                 (s.get("window") or {}).get("valid"), mismatches(c.args, prof.settings or {}),
                                 _loss_curve(run), ((prof.host_probe or {}).get("before") or {}).get("python_ms")))
    verdicts, spread, kept = judge(runs, cands)
    return TrialReport(runs, verdicts, spread, kept)


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
