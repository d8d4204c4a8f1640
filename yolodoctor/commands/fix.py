"""`yolodoctor fix [RUN_DIR] [--verify] [--apply] [--allow-unsafe] [--try KEY=VALUE] [--json]`.

Without --verify/--apply: the plan, as a diff of train arguments, environment and torch flags, with the reason,
expected gain per epoch and one-off cost of each change. --verify runs interleaved A/B trials (fixing/trials.py) and
keeps what measurably helps; --apply relaunches the whole training with the plan (the verified one with --verify),
profiled into a new run directory, and rolls back to the original arguments if that run fails.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from yolodoctor.fixing.fix import speedups
from yolodoctor.presentation import report

if TYPE_CHECKING:
    from rich.console import Console

    from yolodoctor.fixing.candidates import Candidate
    from yolodoctor.fixing.fix import FixOptions
    from yolodoctor.fixing.planner import Plan
    from yolodoctor.fixing.records import TrialReport


def run(run_dir: Path | None, opts: FixOptions, *, as_json: bool) -> int:
    """`yolodoctor fix` as ``opts`` asks (fixing/fix.py decides; this prints): the exit code."""
    from yolodoctor.console import stderr_console, stdout_console
    from yolodoctor.fixing.fix import fix

    err = stderr_console()
    log = (lambda m: err.print(f"[dim]{m}[/]")) if not as_json else (lambda m: err.print(m))
    r = fix(run_dir, opts, log=log, err=err)
    verify, apply = opts.verify, opts.apply
    d, p, trials, cands, applied, run_dir = r.diagnosis, r.plan, r.trials, r.cands, r.applied, r.run_dir
    estimate = r.estimate
    if applied is not None and applied.get("relaunched", True):
        applied["speedups"] = _applied_speedups(run_dir, applied)
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

    print_plan(out, run_dir, p)
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


def print_plan(out: Console, run_dir: Path, p: Plan) -> None:
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
        one_off = f", less its {s['one_off']:.0f} s one-off cost" if s["one_off"] else ""
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

