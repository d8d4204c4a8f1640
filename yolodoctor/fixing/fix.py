"""fix's one entry (`fix`), used by `yolodoctor fix` and `yolodoctor demo` alike: from a run directory and options to
the plan, the trials (interleaved A/B, fixing/trials.py) and the applied training. The commands parse and print;
everything they decide is here.

    result = fix(run_dir, FixOptions(verify=True, apply=True), log=print, err=console)

Without verify or apply: the plan alone. ``verify``: the plan's candidates trialled within a budget (budget.py), the
changes kept that measurably help. ``apply``: the whole training relaunched with what was kept (the plan's safe
changes where verify did not run), recorded lightly into a new run directory, rolled back to the original arguments
if it fails (apply.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yolodoctor.errors import UsageError
from yolodoctor.record.rundir import fresh_dir, latest_run
from yolodoctor.record.settings import as_settings

if TYPE_CHECKING:
    from rich.console import Console

    from yolodoctor.diagnosis.diagnose import Diagnosis
    from yolodoctor.findings import Finding
    from yolodoctor.fixing.budget import Estimate
    from yolodoctor.fixing.candidates import Candidate
    from yolodoctor.fixing.planner import Change, Plan
    from yolodoctor.fixing.records import TrialReport
    from yolodoctor.profiling.watch import RunProgress
    from yolodoctor.record.settings import Settings


TRY_REASON = "--try (yours)"  # the reason a change of the user's own --try carries


@dataclass
class FixOptions:
    """What `yolodoctor fix` is asked (its options), and the demo's own choices (``choose``, ``design``, ``steps``)."""
    verify: bool = False
    apply: bool = False
    allow_unsafe: bool = False
    tries: list[str] = field(default_factory=list)  # --try KEY=VALUE
    reps: int = 2
    max_reps: int | None = None
    yes: bool = False  # replay a run recorded on another machine
    budget: float | None = None  # verify's budget in seconds (None: what the training can pay back)
    debug: bool = False
    probe_applied: bool = False  # record the applied training with trace and loader probe
    rule_dirs: list[str | Path] | None = None
    steps: int | str = "auto"  # each trial's steps
    design: bool = True  # fit the trials to the budget (False: run the candidates as chosen)
    choose: Callable[[list[Candidate], list[Finding]], list[Candidate]] | None = None  # which candidates to trial


@dataclass
class FixResult:
    run_dir: Path
    diagnosis: Diagnosis
    plan: Plan
    cands: list[Candidate] | None  # the candidates trialled (None: verify did not run)
    trials: TrialReport | None
    estimate: Estimate | None  # verify's cost against what it can save (None: no design was made)
    applied: dict[str, Any] | None  # fixing/apply.relaunch's record, or why nothing was relaunched


def fix(run_dir: Path | None, opts: FixOptions, *, log: Callable[[str], None], err: Console,
        on_plan: Callable[[Plan], None] | None = None) -> FixResult:
    """Plan, verify and apply as ``opts`` asks, for ``run_dir`` (None: the latest run); ``on_plan`` is shown the plan
    before any trial runs. Raises UsageError where the options cannot be honoured (an unsafe --try without
    --allow-unsafe, a replay of an attach() run or of another machine's run without --yes)."""
    from yolodoctor.console import echo_to, training_status
    from yolodoctor.diagnosis.diagnose import diagnose
    from yolodoctor.fixing.apply import relaunch
    from yolodoctor.fixing.planner import plan as make_plan
    from yolodoctor.profiling.watch import watching
    from yolodoctor.record.profile import host_id

    o = opts
    run_dir = run_dir or latest_run()
    d = diagnose(run_dir, o.rule_dirs)
    p = make_plan(d.findings, d.facts, d.profile.settings, d.profile.args, allow_unsafe=o.allow_unsafe)
    if o.tries:
        _add_tries(p, d, o)
    if on_plan is not None:
        on_plan(p)
    if (o.verify or o.apply) and d.profile.mode not in ("args", "script"):
        raise UsageError(f"--verify/--apply replay a training; {run_dir} was recorded with yolodoctor.attach() "
                         "(a notebook): profile it with KEY=VALUE arguments or `-- python train.py` first")
    command = list(d.profile.command or []) if d.profile.mode == "script" else None
    if (o.verify or o.apply) and d.profile.host != host_id() and not o.yes:
        raise UsageError(f"{run_dir} was recorded on {d.profile.host or 'another machine'}; replaying its training "
                         "here needs --yes")
    replay = dict(d.profile.args)
    if (o.verify or o.apply) and d.profile.host != host_id():
        # output folders of the machine that recorded the run are not replayed here (--yes consents to the training,
        # not to writing where a foreign profile says): Ultralytics writes under its default runs/ folder instead
        gone = [k for k in ("project", "name") if replay.pop(k, None) is not None]
        if gone:
            log(f"not replayed from {d.profile.host}: {', '.join(gone)} (Ultralytics' default output folder instead)")
    trials = None
    chosen = list(p.changes)
    if o.apply and not o.verify and any(c.changes_training for c in chosen):
        raise UsageError("the plan changes what is optimised (" + ", ".join(f"{c.key}={c.after}" for c in chosen
                         if c.changes_training) + "): --apply it with --verify, so that a loss-parity trial checks it")
    if o.apply and not o.verify:  # applied untried: the plan's changes that only a trial can judge are left out
        chosen = _untried(chosen, log, keep_tries=True)
    cands: list[Candidate] | None = None
    estimate: Estimate | None = None
    if o.verify and p.changes:
        from yolodoctor.fixing.candidates import candidates

        cands = o.choose(candidates(p), d.findings) if o.choose else candidates(p)
        if o.design:
            cands, top, est = design(cands, o.reps, max(o.max_reps or o.reps, o.reps), d.profile, p, o.budget, log,
                                     run_dir)
            estimate = est
        else:  # the caller chose the trials (demo): they run as chosen
            top, est = max(o.max_reps or o.reps, o.reps), None
        if cands and (est is None or est.fits):
            trials = verify_plan(replay, p, d.profile, run_dir, cands, reps=o.reps, max_reps=top, log=log,
                                 command=command, err=err, debug=o.debug, steps=o.steps)
            trials.estimate = est
            chosen = trials.kept
        elif cands:  # unverified: only what trains the same model on the same schedule, at no risk, is applied untried
            chosen = _untried(p.changes, log if o.apply else (lambda m: None), keep_tries=False)
    applied = None
    if o.apply and chosen:
        # a script's own output is shown, as `profile` shows it; Ultralytics' (quiet) log only under --debug
        with training_status(err, "applying: the whole training") as show, \
                watching(progress=show, echo=echo_to(err) if command or o.debug else None, debug=o.debug):
            applied = relaunch(replay, chosen, run_dir, log, command, probes=o.probe_applied)
        applied["verified"] = trials is not None
    elif o.apply:  # nothing to change: relaunching the same training would only repeat it
        why = ("fix --verify kept no change: the original arguments stand" if o.verify and p.changes else
               "the plan holds no change: the original arguments stand")
        log(f"not relaunched: {why}")
        applied = {"relaunched": False, "status": "not-relaunched", "why": why, "run_dir": None,
                   "rolled_back": False, "attempts": [], "changes": []}
    return FixResult(run_dir, d, p, cands, trials, estimate, applied)


def _untried(changes: list[Change], log: Callable[[str], None], *, keep_tries: bool) -> list[Change]:
    """What may be applied without a trial: the changes that train the same model on the same schedule at no risk
    (judge.needs_trial), and with ``keep_tries`` the user's own --try changes, as asked (`fix --apply` without
    --verify); the others are named with why."""
    from yolodoctor.fixing.judge import needs_trial
    from yolodoctor.fixing.planner import requirements

    why: dict[int, str] = {}
    for c in changes:
        if not (keep_tries and c.reason == TRY_REASON) and (reason := needs_trial(c)):
            why[id(c)] = reason
    for c in changes:  # a change made for another (workers to feed a larger batch) goes where that one goes
        gone = [x for x in requirements(c, changes) if id(x) in why]
        if id(c) not in why and gone:
            why[id(c)] = f"it serves {gone[0].key}={gone[0].after}, which is not applied"
    left = [c for c in changes if id(c) in why]
    if left:
        log("not applied unverified: " + "; ".join(f"{c.key}={c.after} ({why[id(c)]})" for c in left))
    return [c for c in changes if id(c) not in why]


def _add_tries(p: Plan, d: Diagnosis, o: FixOptions) -> None:
    """--try KEY=VALUE: the user's candidates join the plan (a change to training only with --allow-unsafe)."""
    from yolodoctor.fixing.planner import cuda_graphs_refusal

    extra = user_candidates(o.tries, d.profile.settings)
    unsafe = [f"{c.key}={c.after}" for c in extra if c.changes_training]
    if unsafe and not o.allow_unsafe:
        raise UsageError(f"--try {', '.join(unsafe)} changes what is optimised (effective batch or precision): "
                         "add --allow-unsafe (a loss-parity trial then checks it)")
    p.changes += [c for c in extra if c.key not in {x.key for x in p.changes}]
    why = cuda_graphs_refusal(p, d.facts, d.profile.settings)
    if why:
        nbs = d.facts.get("settings.nbs") or 64
        raise UsageError(f"--try compile=reduce-overhead: {why}; try it with batch={nbs:.0f}")


def user_candidates(words: list[str], settings: Settings) -> list[Change]:
    """--try KEY=VALUE: the user's own candidates, verified like the planner's (safe only if on the allow-list)."""
    from yolodoctor import trainargs
    from yolodoctor.fixing.planner import ALLOWED, Change, mark_training_change

    out = []
    for k, v in trainargs.parse_kv(words).items():
        if k not in ALLOWED["args"]:
            raise UsageError(f"--try {k}=...: yolodoctor only tries {', '.join(sorted(ALLOWED['args']))}")
        out.append(mark_training_change(Change("args", k, settings.get(k), v, TRY_REASON), settings.get("nbs")))
    return out


def verify_plan(replay: dict[str, Any], plan: Plan, profile: Any, run_dir: Path, cands: list[Candidate], *,
                reps: int, max_reps: int, log: Callable[[str], None], command: list[str] | None = None,
                err: Console | None = None, debug: bool = False, steps: int | str = "auto") -> TrialReport:
    """`fix --verify`'s trials of ``cands`` (fixing/trials.py), each a bounded profile of the training recorded in
    ``run_dir``, with a spinner on ``err`` saying which trial runs and how far it is. The trials' own output (
    Ultralytics' progress bars, a script's prints) stays in each trial's output.log (shown under --debug)."""
    from yolodoctor.console import echo_to, status, stderr_console
    from yolodoctor.fixing.apply import planned_images, seed_of
    from yolodoctor.fixing.trials import run_trials
    from yolodoctor.profiling.watch import watching

    err = err or stderr_console()
    st = as_settings(profile.settings)
    total = len(cands) * reps
    seen: list[str] = []
    with status(err, "verifying: starting the first trial") as update:
        def progress(p: RunProgress) -> None:
            if str(p.run_dir) not in seen:
                seen.append(str(p.run_dir))
            of = f"{len(seen)}/{total}" if len(seen) <= total else f"{len(seen)}, a repeat to decide"
            update(f"verifying, trial {of} ({p.run_dir.name}): {p.describe()}")

        with watching(progress=progress, echo=echo_to(err) if debug else None, debug=debug):
            return run_trials(dict(replay), plan, out_dir=fresh_dir(run_dir.parent / f"trials-{run_dir.name}"),
                              reps=reps, max_reps=max_reps, log=log, command=command, steps=steps,
                              planned_images=planned_images(st), seed=seed_of(st, replay), cands=cands)


def speedups(t: TrialReport, cands: list[Candidate] | None) -> dict[str, dict[str, Any]]:
    """Each candidate's speed over what it is measured against (its reference, else the baseline): the ratio of the
    median images/s, and its 95% interval where the trials measured their noise: the same t-test as the verdict's
    threshold (fixing/judge.Noise: each side at the pooled deviation, or its own where that is larger), taken on the
    log of the ratio. The interval is one look: the verdict's pairs rule and 3% floor stay stricter."""
    import math
    import statistics

    from yolodoctor.fixing.parity import t975

    ok: dict[str, list[float]] = {}
    for r in t.runs:
        if r.status == "complete" and r.images_per_s:
            ok.setdefault(r.candidate, []).append(r.images_per_s)
    against = {c.name: c.against for c in cands or []}
    noise = t.noise
    out: dict[str, dict[str, Any]] = {}
    for v in t.verdicts[1:]:
        ref = against.get(v.candidate, "baseline")
        a, b = ok.get(v.candidate, []), ok.get(ref, [])
        if not a or not b:
            continue
        factor = statistics.median(a) / statistics.median(b)
        lo = hi = None
        if noise is not None and noise.deviation and noise.df >= 1:
            pooled = noise.deviation

            def dev(g: list[float], pooled: float = pooled) -> float:
                own = statistics.stdev(g) / statistics.fmean(g) if len(g) >= 2 else 0.0
                return max(pooled, own)

            half = t975(noise.df) * math.sqrt(sum(dev(g) ** 2 / len(g) for g in (a, b)))
            lo, hi = factor * math.exp(-half), factor * math.exp(half)
        out[v.candidate] = {"over": ref, "factor": factor, "low": lo, "high": hi}
    return out


def design(cands: list[Candidate], reps: int, max_reps: int, profile: Any, plan: Plan, budget: float | None,
            log: Callable[[str], None], run_dir: Path) -> tuple[list[Candidate], int, Estimate]:
    """The trials to run within the budget (--budget, else what the planned training can pay back:
    fixing/budget.default_budget); says what verify will cost against what it can save, and what it left out. An
    estimate that does not ``fits`` means verify does not run."""
    import math
    import shlex

    from yolodoctor.fixing.budget import default_budget, fit

    st = as_settings(profile.settings)
    saving = plan.run_saving()["planned_run_upper_bound"]
    epochs = st.get("epochs") or plan.epochs
    target, cap = (budget, budget) if budget is not None else default_budget(saving, epochs, plan.epoch_s)
    limit = target
    loader_s = (profile.loader_capacity or {}).get("seconds") or 0.0
    full = fit(cands, reps, max_reps, profile.summary or {}, st, saving, None,
               loader_s if isinstance(loader_s, (int, float)) else 0.0)[2]
    cands, max_reps, est = fit(cands, reps, max_reps, profile.summary or {}, st, saving, limit,
                               loader_s if isinstance(loader_s, (int, float)) else 0.0)
    if not est.fits and cap is not None and cap != limit and est.verify_s <= cap:
        est.budget_s = limit = cap  # over the aim, within what the training can pay back: it runs
    over = f" over the planned {epochs:g} epochs" if isinstance(epochs, (int, float)) else ""
    can = f"the plan can save at most {saving:.0f} s{over}" if saving is not None else "what the plan saves is unknown"
    if budget is not None:
        said = f"; budget {budget:.0f} s (--budget)"
    elif target is not None and cap is not None and target != cap:
        said = (f"; budget {target:.0f} s (a quarter of the saving for a long training), at most {cap:.0f} s (what "
                "the training can pay back)")
    else:
        said = f"; budget {cap:.0f} s (what the training can pay back)" if cap is not None else ""
    log(f"verify: about {full.verify_s:.0f} s for {full.trials} trials; {can}{said}")
    if not est.fits:
        log(f"verify skipped: even its smallest design ({est.trials} trials, about {est.verify_s:.0f} s) costs more "
            f"than the budget of {limit:.0f} s; `yolodoctor fix {shlex.quote(str(run_dir))} --verify --budget "
            f"{math.ceil(est.verify_s)}` runs it anyway")
    elif est.skipped:
        log(f"within the budget: {est.trials} trials, about {est.verify_s:.0f} s; left out: " + "; ".join(est.skipped)
            + f"; `yolodoctor fix {shlex.quote(str(run_dir))} --verify --budget {math.ceil(full.verify_s)}` runs "
              "them all")
    return cands, max_reps, est


