"""`yolodoctor profile [KEY=VALUE ...] [--steps N] [--out DIR]`."""

from __future__ import annotations

from yolodoctor.presentation import report
from yolodoctor.findings import Severity, exit_code
from yolodoctor.record.profile import Profile

SUMMARY = [
    ("status", "status"), ("reason", "reason"), ("steps", "summary.steps"), ("images", "summary.images"),
    ("steady images/s", "summary.images_per_s"), ("data-wait share", "summary.data_wait_share"),
    ("median step s", "summary.step_s_median"), ("device", "settings.device"), ("batch", "settings.batch"),
    ("workers", "settings.workers"), ("precision", "settings.precision"), ("compile active", "settings.compile_active"),
    ("loader alone images/s", "loader_capacity.images_per_s"), ("trace kernels/step", "trace.kernels_per_step"),
    ("trace GPU busy ms/step", "trace.kernel_busy_ms_per_step"), ("trace launches/step", "trace.launches_per_step"),
]


def flat(p: Profile) -> dict:
    d = {"status": p.status, "reason": p.reason}
    d.update({f"summary.{k}": v for k, v in p.summary.items()})
    d.update({f"settings.{k}": v for k, v in p.settings.items()})
    d.update({f"loader_capacity.{k}": v for k, v in (p.loader_capacity or {}).items()})
    d.update({f"trace.{k}": v for k, v in ((p.trace or {}).get("summary") or {}).items()})
    return d


def run(words: list[str], *, steps: int | None, out, as_json: bool, fail_on: Severity, trace: bool = True,
        loader_seconds: float = 8.0, command: list[str] | None = None, hz: float = 5.0,
        gpu_telemetry: bool = True) -> int:
    from yolodoctor import trainargs
    from yolodoctor.console import stderr_console, stdout_console
    from yolodoctor.profiling.runner import exit_code_for, run_profile

    user = trainargs.parse_kv(words) if not command else {}
    args = {"model": trainargs.DEFAULT_MODEL, **user} if not command else None
    check_facts = None
    if args:
        from yolodoctor.check.run import quick_check

        check_facts = quick_check(user, trainargs.effective(user))  # a data.yaml that cannot load: exit 2
    err = stderr_console()
    run_dir, prof = run_profile(args, command=command, check_facts=check_facts, steps=None if steps == -1 else (steps or "auto"), out=out, trace=trace,
                                loader_seconds=loader_seconds, hz=hz, gpu_telemetry=gpu_telemetry,
                                log=lambda m: err.print(f"[dim]{m}[/]"))
    from yolodoctor.diagnosis.diagnose import diagnose

    diag = diagnose(run_dir)
    findings = diag.reported
    if as_json:
        report.dump_json(report.envelope("profile", findings, diag.facts, run_dir=str(run_dir),
                                         profile=prof.model_dump(by_alias=True, mode="json")))
    else:
        o = stdout_console()
        o.rule(f"[bold]yolodoctor profile: {run_dir}")
        report.render_facts(o, flat(prof), SUMMARY)
        if not prof.summary.get("window", {}).get("valid", True):
            o.print(f"[yellow]window too short to conclude:[/] {prof.summary['window']['why']}")
        report.render_findings(o, findings, "Diagnosis (most time saved first)", group=False)
    code = exit_code_for(prof)
    return code if code else exit_code(findings, fail_on)
