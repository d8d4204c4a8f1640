"""`yolodoctor fix [RUN_DIR] [--allow-unsafe] [--json]`: the plan, as a diff of train arguments, environment and
torch flags, with the reason, expected gain per epoch and one-off cost of each change."""

from __future__ import annotations

from pathlib import Path

from yolodoctor import report
from yolodoctor.errors import InputError
from yolodoctor.rundir import DEFAULT_BASE


def latest_run(base: Path = DEFAULT_BASE) -> Path:
    runs = [p.parent for p in base.glob("*/profile.json")] if base.is_dir() else []
    if not runs:
        raise InputError(f"no run directory under {base}; give RUN_DIR or run `yolodoctor profile` first")
    return max(runs, key=lambda p: (p / "profile.json").stat().st_mtime)


def run(run_dir: Path | None, *, allow_unsafe: bool, as_json: bool, rule_dirs=None) -> int:
    from yolodoctor.cli import stderr_console, stdout_console
    from yolodoctor.diagnosis.diagnose import diagnose
    from yolodoctor.fixing.planner import plan

    run_dir = run_dir or latest_run()
    if not as_json:
        stderr_console().print(f"[dim]planning from {run_dir}[/]")
    d = diagnose(run_dir, rule_dirs)
    p = plan(d.findings, d.facts, d.profile.settings, d.profile.args, allow_unsafe=allow_unsafe)
    if as_json:
        report.dump_json(report.envelope("fix", d.findings, d.facts, run_dir=str(run_dir), plan=p.to_dict(),
                                         trials=[]))
        return 0
    out = stdout_console()
    out.rule(f"[bold]yolodoctor fix: plan for {run_dir}")
    if not p.changes:
        out.print("[green]No change to propose.[/]")
    for c in p.changes:
        where = {"args": "", "env": "env ", "torch_flags": "torch.backends."}[c.kind]
        out.print(f"[red]- {where}{c.key}={c.before!r}[/]\n[green]+ {where}{c.key}={c.after!r}[/]")
        gain = f"up to {c.seconds_saved_per_epoch:.1f} s/epoch" if c.seconds_saved_per_epoch else "gain unknown"
        one_off = f", one-off {c.one_off_seconds:.0f} s" if c.one_off_seconds else ""
        flag = " [yellow]unsafe[/]" if c.safety == "unsafe" else ""
        out.print(f"  [dim]{c.reason}: {gain}{one_off}{flag}{' - ' + c.note if c.note else ''}[/]")
    s = p.run_saving()
    if s["planned_run_upper_bound"] is not None:
        out.print(f"\nOver the planned {p.epochs:.0f} epochs: at most {s['planned_run_upper_bound']:.0f} s saved "
                  f"(the largest single gain x epochs, minus {s['one_off']:.0f} s one-off). Gains are upper bounds "
                  "from the rules and do not add up; trials measure them.")
    for x in p.dropped:
        out.print(f"[dim]not planned: {x['key']} - {x['reason']}[/]")
    return 0
