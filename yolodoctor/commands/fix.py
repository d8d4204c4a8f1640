"""`yolodoctor fix [RUN_DIR] [--verify] [--apply] [--allow-unsafe] [--try KEY=VALUE] [--json]`.

Without --verify/--apply: the plan, as a diff of train arguments, environment and torch flags, with the reason,
expected gain per epoch and one-off cost of each change. --verify runs interleaved A/B trials (fixing/trials.py) and
keeps what measurably helps; --apply relaunches the whole training with the plan (the verified one with --verify),
profiled into a new run directory, and rolls back to the original arguments if that run fails.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yolodoctor.errors import InputError, UsageError
from yolodoctor.presentation import report
from yolodoctor.record.rundir import DEFAULT_BASE

if TYPE_CHECKING:
    from rich.console import Console

    from yolodoctor.fixing.budget import Estimate
    from yolodoctor.fixing.candidates import Candidate
    from yolodoctor.fixing.planner import Change, Plan
    from yolodoctor.fixing.records import TrialReport
    from yolodoctor.profiling.watch import RunProgress


def latest_run(base: Path = DEFAULT_BASE) -> Path:
    runs = [p.parent for p in base.glob("*/profile.json")] if base.is_dir() else []
    runs = [r for r in runs if not r.name.startswith(("fix-", "trials"))] or runs
    if not runs:
        raise InputError(f"no run directory under {base}; give RUN_DIR or run `yolodoctor profile` first")
    return max(runs, key=lambda p: (p / "profile.json").stat().st_mtime)


def user_candidates(words: list[str], settings: dict[str, Any]) -> list[Change]:
    """--try KEY=VALUE: the user's own candidates, verified like the planner's (safe only if on the allow-list)."""
    from yolodoctor import trainargs
    from yolodoctor.fixing.planner import ALLOWED, Change, mark_training_change

    out = []
    for k, v in trainargs.parse_kv(words).items():
        if k not in ALLOWED["args"]:
            raise UsageError(f"--try {k}=...: yolodoctor only tries {', '.join(sorted(ALLOWED['args']))}")
        out.append(mark_training_change(Change("args", k, settings.get(k), v, "--try (yours)"), settings.get("nbs")))
    return out


def run(run_dir: Path | None, *, allow_unsafe: bool, as_json: bool, rule_dirs: list[str | Path] | None = None,
        verify: bool = False,
        apply: bool = False, tries: list[str] | None = None, reps: int = 2, max_reps: int | None = None,
        yes: bool = False, budget: float | None = None, debug: bool = False, probe_applied: bool = False) -> int:
    from yolodoctor.console import echo_to, stderr_console, stdout_console, training_status
    from yolodoctor.diagnosis.diagnose import diagnose
    from yolodoctor.fixing.apply import relaunch
    from yolodoctor.fixing.planner import cuda_graphs_refusal
    from yolodoctor.fixing.planner import plan as make_plan
    from yolodoctor.profiling.watch import watching
    from yolodoctor.record.profile import host_id

    err = stderr_console()
    run_dir = run_dir or latest_run()
    d = diagnose(run_dir, rule_dirs)
    p = make_plan(d.findings, d.facts, d.profile.settings, d.profile.args, allow_unsafe=allow_unsafe)
    if tries:
        extra = user_candidates(tries, d.profile.settings)
        unsafe = [f"{c.key}={c.after}" for c in extra if c.changes_training]
        if unsafe and not allow_unsafe:
            raise UsageError(f"--try {', '.join(unsafe)} changes what is optimised (effective batch or precision): "
                             "add --allow-unsafe (a loss-parity trial then checks it)")
        p.changes += [c for c in extra if c.key not in {x.key for x in p.changes}]
        why = cuda_graphs_refusal(p, d.facts, d.profile.settings)
        if why:
            nbs = d.facts.get("settings.nbs") or 64
            raise UsageError(f"--try compile=reduce-overhead: {why}; try it with batch={nbs:.0f}")
    if (verify or apply) and d.profile.mode not in ("args", "script"):
        raise UsageError(f"--verify/--apply replay a training; {run_dir} was recorded with yolodoctor.attach() "
                         "(a notebook): profile it with KEY=VALUE arguments or `-- python train.py` first")
    command = list(d.profile.command or []) if d.profile.mode == "script" else None
    if (verify or apply) and d.profile.host != host_id() and not yes:
        raise UsageError(f"{run_dir} was recorded on {d.profile.host or 'another machine'}; replaying its training "
                         "here needs --yes")
    log = (lambda m: err.print(f"[dim]{m}[/]")) if not as_json else (lambda m: err.print(m))
    replay = dict(d.profile.args)
    if (verify or apply) and d.profile.host != host_id():
        # output folders of the machine that recorded the run are not replayed here (--yes consents to the training,
        # not to writing where a foreign profile says): Ultralytics writes under its default runs/ folder instead
        gone = [k for k in ("project", "name") if replay.pop(k, None) is not None]
        if gone:
            log(f"not replayed from {d.profile.host}: {', '.join(gone)} (Ultralytics' default output folder instead)")
    trials = None
    chosen = list(p.changes)
    if apply and not verify and any(c.changes_training for c in chosen):
        raise UsageError("the plan changes what is optimised (" + ", ".join(f"{c.key}={c.after}" for c in chosen
                         if c.changes_training) + "): --apply it with --verify, so that a loss-parity trial checks it")
    cands = None
    estimate: Estimate | None = None
    if verify and p.changes:
        from yolodoctor.fixing.candidates import candidates

        cands, top, est = _design(candidates(p), reps, max(max_reps or reps, reps), d.profile, p, budget, log,
                                  run_dir)
        estimate = est
        if est.fits:
            trials = verify_plan(replay, p, d.profile, run_dir, cands, reps=reps, max_reps=top, log=log,
                                 command=command, err=err, debug=debug)
            trials.estimate = est
            chosen = trials.kept
        else:  # unverified: only what trains the same model on the same schedule is applied without a trial
            from yolodoctor.fixing.judge import reschedules

            chosen = [c for c in p.changes if not c.changes_training and not reschedules(c)]
            if apply and len(chosen) < len(p.changes):
                log("not applied unverified (they change training or its schedule; a trial checks their loss): "
                    + ", ".join(f"{c.key}={c.after}" for c in p.changes if all(c is not x for x in chosen)))
    applied = None
    if apply and chosen:
        # a script's own output is shown, as `profile` shows it; Ultralytics' (quiet) log only under --debug
        with training_status(err, "applying: the whole training") as show, \
                watching(progress=show, echo=echo_to(err) if command or debug else None, debug=debug):
            applied = relaunch(replay, chosen, run_dir, log, command, probes=probe_applied)
        applied["verified"] = trials is not None
        applied["speedups"] = _applied_speedups(run_dir, applied)
    elif apply:  # nothing to change: relaunching the same training would only repeat it
        why = ("fix --verify kept no change: the original arguments stand" if verify and p.changes else
               "the plan holds no change: the original arguments stand")
        log(f"not relaunched: {why}")
        applied = {"relaunched": False, "status": "not-relaunched", "why": why, "run_dir": None,
                   "rolled_back": False, "attempts": [], "changes": []}
    if as_json:
        report.dump_json(report.envelope("fix", d.findings, d.facts, run_dir=str(run_dir), plan=p.to_dict(),
                                         trials=trials.to_dict() if trials else [], applied=applied,
                                         verify=estimate.to_dict() if estimate is not None else None,
                                         speedups=speedups(trials, cands) if trials else {}))
        return 0 if not applied or applied["status"] in ("complete", "not-relaunched") else 1
    _print_report(stdout_console(), run_dir, p, trials, cands, (d.profile.settings or {}).get("images_per_epoch"),
                  planned_only=not verify and not apply, applied=applied, profile=d.profile)
    return 0 if not applied or applied["status"] in ("complete", "not-relaunched") else 1


def _print_report(out: Console, run_dir: Path, p: Plan, trials: TrialReport | None, cands: list[Candidate] | None,
                  images_per_epoch: float | None, *, planned_only: bool, applied: dict[str, Any] | None,
                  profile: Any = None) -> None:
    """The plan, the trials' verdicts, and what was applied (or the --verify command that comes next)."""
    import shlex

    from rich.markup import escape

    _print_plan(out, run_dir, p)
    if trials:
        print_trials(out, trials, cands, images_per_epoch)
    if p.changes and planned_only:
        from yolodoctor.presentation.verdict import foreign

        where = foreign(profile)
        yes = " --yes" if where else ""
        out.print(f"\nnext: [cyan]yolodoctor fix {escape(shlex.quote(str(run_dir)))} --verify{yes}"
                  "[/]  [dim](trials each change against the training as it is; keeps only what measurably helps"
                  f"{'; ' + escape(where) if where else ''})[/]")
    if applied and not applied.get("relaunched", True):
        out.print(f"\n[bold]not relaunched[/]: {applied['why']}" + (
            " (tried and measured: " + ", ".join(f"{v.candidate} {v.gain:+.0%}" for v in trials.verdicts[1:]
                                                  if v.gain is not None) + ")" if trials else ""))
    elif applied:
        out.print(f"\n[bold]applied[/]: {applied['run_dir']} ({applied['status']})"
                  + (f" - [yellow]rolled back[/]: {applied['rollback_reason']}" if applied["rolled_back"] else ""))
        if applied.get("speedups"):
            from yolodoctor.presentation.comparison import speedup_line

            out.print(speedup_line(applied["speedups"]) + " [dim](against the profile it fixed)[/]",
                      highlight=False)


def _applied_speedups(run_dir: Path, applied: dict[str, Any]) -> dict[str, dict[str, Any]] | None:
    """The applied training's speed-up over the profile it fixed, on its steps and on its wall time."""
    from yolodoctor.errors import InputError
    from yolodoctor.presentation.comparison import compare, speedups

    if applied.get("status") != "complete" or not applied.get("run_dir"):
        return None
    try:
        return speedups(compare(run_dir, applied["run_dir"]))
    except InputError:
        return None


def verify_plan(replay: dict[str, Any], plan: Plan, profile: Any, run_dir: Path, cands: list[Candidate], *,
                reps: int, max_reps: int, log: Callable[[str], None], command: list[str] | None = None,
                err: Console | None = None, debug: bool = False, steps: int | str = "auto") -> TrialReport:
    """`fix --verify`'s trials of ``cands`` (fixing/trials.py), each a bounded profile of the training recorded in
    ``run_dir``, with a spinner on ``err`` saying which trial runs and how far it is. The trials' own output (
    Ultralytics' progress bars, a script's prints) stays in each trial's output.log (shown under --debug)."""
    from yolodoctor.console import echo_to, status, stderr_console
    from yolodoctor.fixing.apply import fresh_dir, planned_images, seed_of
    from yolodoctor.fixing.trials import run_trials
    from yolodoctor.profiling.watch import watching

    err = err or stderr_console()
    st = profile.settings or {}
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
            def dev(g: list[float]) -> float:
                own = statistics.stdev(g) / statistics.fmean(g) if len(g) >= 2 else 0.0
                return max(noise.deviation, own)

            half = t975(noise.df) * math.sqrt(sum(dev(g) ** 2 / len(g) for g in (a, b)))
            lo, hi = factor * math.exp(-half), factor * math.exp(half)
        out[v.candidate] = {"over": ref, "factor": factor, "low": lo, "high": hi}
    return out


def _design(cands: list[Candidate], reps: int, max_reps: int, profile: Any, plan: Plan, budget: float | None,
            log: Callable[[str], None], run_dir: Path) -> tuple[list[Candidate], int, Estimate]:
    """The trials to run within the budget (--budget, else what the planned training can pay back:
    fixing/budget.default_budget); says what verify will cost against what it can save, and what it left out. An
    estimate that does not ``fits`` means verify does not run."""
    import math
    import shlex

    from yolodoctor.fixing.budget import default_budget, fit

    st = profile.settings or {}
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


def _print_plan(out: Console, run_dir: Path, p: Plan) -> None:
    out.rule(f"[bold]yolodoctor fix: plan for {run_dir}")
    if not p.changes:
        out.print("[green]No change to propose.[/]")
    for c in p.changes:
        where = {"args": "", "env": "env ", "torch_flags": "torch.backends."}[c.kind]
        out.print(f"[red]- {where}{c.key}={c.before!r}[/]\n[green]+ {where}{c.key}={c.after!r}[/]")
        gain = (f"saves up to {c.seconds_saved_per_epoch:.1f} s per epoch" if c.seconds_saved_per_epoch
                else "gain unknown")
        one_off = f", one-off {c.one_off_seconds:.0f} s" if c.one_off_seconds else ""
        flag = " [yellow]unsafe[/]" if c.safety == "unsafe" else ""
        out.print(f"  [dim]{c.reason}: {gain}{one_off}{flag}{' - ' + c.note if c.note else ''}[/]")
    s = p.run_saving()
    if s["planned_run_upper_bound"] is not None:
        one_off = f", less {s['one_off']:.0f} s of one-off costs" if s["one_off"] else ""
        out.print(f"\nOver the planned {p.epochs:.0f} epochs: at most {s['planned_run_upper_bound']:.0f} s saved "
                  f"(the largest single gain x epochs{one_off}). Gains are upper bounds from the rules and do not add "
                  "up; trials measure them.")
    for c in p.fallbacks:
        out.print(f"[dim]also trialled: {c.key}={c.after!r} ({c.reason}), the safe alternative should the unsafe "
                  "change fail its loss parity[/]")
    for x in p.dropped:
        out.print(f"[dim]not planned: {x['key']} - {x['reason']}[/]")


def print_trials(out: Console, t: TrialReport, cands: list[Candidate] | None = None,
                 images_per_epoch: float | None = None) -> None:
    """The trials' verdicts: each candidate's median images/s and seconds per epoch, its speed-up over what it is
    measured against as a factor with its 95% interval, whether it is kept; then why, one line each."""
    from rich.markup import escape
    from rich.table import Table

    ups = speedups(t, cands)
    table = Table("candidate", "runs", "images/s", "s/epoch", "speed-up (95% interval)", "kept",
                  title="Trials (interleaved, repeated)")
    for v in t.verdicts:
        per_epoch = f"{images_per_epoch / v.median:.1f}" if v.median and images_per_epoch else "-"
        up = ups.get(v.candidate)
        if v.candidate == "baseline":
            factor = "1x (reference)" if v.median else "-"
        elif up is None:
            factor = "-"
        else:
            factor = f"{up['factor']:.2f}x" + (f" ({up['low']:.2f}-{up['high']:.2f})" if up["low"] else "") + (
                f" over {up['over']}" if up["over"] != "baseline" else "")
        table.add_row(escape(v.candidate), str(v.runs), f"{v.median:.1f}" if v.median else "-", per_epoch, factor,
                      "[green]yes[/]" if v.kept else "no")
    out.print(table)
    for v in t.verdicts:
        out.print(f"[bold]{escape(v.candidate)}[/]: {escape(v.why)}")
    if t.noise and t.noise.deviation:
        out.print(f"[dim]Run-to-run noise: {t.noise.deviation:.1%} (relative deviation pooled over the configurations "
                  f"that ran twice or more, {t.noise.df} degrees of freedom); thresholds are a t-test's at 97.5%.[/]")
    from yolodoctor.fixing.judge import DECIDE_MAX

    for v in t.verdicts:
        if v.inconclusive:  # faster within the noise after the last repeat fix ran: what would decide it
            out.print(f"[yellow]{v.candidate}: undecided after {v.runs} repeats. "
                      + (f"About {v.to_decide} repeats of it and of what it is measured against would tell its gain "
                         f"from this machine's noise (--max-reps {v.to_decide}).[/]" if v.to_decide else
                         f"Its gain is too small to tell from this machine's noise in {DECIDE_MAX} repeats: take it "
                         "as no gain here.[/]"))
    cost = t.fixed_cost()
    if cost.get("total"):
        fixed = {k: v for k, v in cost.items() if k not in ("steps", "total")}
        out.print(f"[dim]Verify took {t.wall_s or 0:.0f} s for {len(t.runs)} trials; a trial's median "
                  f"{cost['total']:.1f} s went to: " + ", ".join(f"{k} {v:.1f} s" for k, v in fixed.items())
                  + f" and {cost.get('steps', 0):.1f} s of measured steps.[/]")
    from yolodoctor.profiling.hostprobe import MOVED

    hs = t.host_spread
    if hs is not None and hs > MOVED:
        ms = [r.host_ms for r in t.runs if r.host_ms]
        out.print(f"[yellow]The machine's own speed moved {hs:.0%} across the trials (a fixed Python loop timed before "
                  f"each took {min(ms):.0f} to {max(ms):.0f} ms): on a shared machine a small gain or loss can be the "
                  "machine's, not the change's. The interleaved order spreads it over every candidate; more --reps "
                  "(or --max-reps) narrow it.[/]")


_print_trials = print_trials  # the name the trial tests know
