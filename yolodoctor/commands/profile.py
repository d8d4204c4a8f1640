"""`yolodoctor profile [KEY=VALUE ...] [--steps N] [--out DIR]`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from yolodoctor.findings import Severity, exit_code
from yolodoctor.presentation import report
from yolodoctor.record.profile import Profile

# (label, key): keys of flat(profile) and of the diagnosis' facts; values shown in human units (report.human)
SUMMARY = [
    ("status", "status"), ("reason", "reason"), ("steps", "summary.steps"), ("images", "summary.images"),
    ("steady rate", "summary.images_per_s"), ("data wait", "summary.data_wait_share"),
    ("median step", "summary.step_s_median"), ("device", "settings.device"), ("batch", "run.batch"),
    ("workers", "settings.workers"), ("precision", "settings.precision"), ("cache", "settings.cache"),
    ("compile active", "settings.compile_active"), ("loader alone", "loader_capacity.images_per_s"),
    ("trace kernels/step", "trace.kernels_per_step"), ("trace GPU busy/step", "trace.kernel_busy_ms_per_step"),
    ("trace launches/step", "trace.launches_per_step"),
]


def flat(p: Profile) -> dict[str, Any]:
    d: dict[str, Any] = {"status": p.status, "reason": p.reason}
    d.update({f"summary.{k}": v for k, v in p.summary.items()})
    d.update({f"settings.{k}": v for k, v in dict(p.settings).items()})
    d.update({f"loader_capacity.{k}": v for k, v in (p.loader_capacity or {}).items()})
    d.update({f"trace.{k}": v for k, v in ((p.trace or {}).get("summary") or {}).items()})
    for r in p.ranks or []:  # DDP: the ranks side by side, each over its own steady window
        d[f"ranks.{r.get('rank')}"] = report.rank_line(r)
    return d


def summary_rows(prof: Profile, facts: dict[str, Any], keys: list[tuple[str, str]] = SUMMARY
                 ) -> tuple[dict[str, Any], list[tuple[str, str]], dict[str, str]]:
    """The profile's table: its values, its (label, key) rows - the rate marked as not steady where the window could
    not be trusted, with no such figure passed off as steady - and the notes beside the settings Ultralytics changed."""
    values = {**flat(prof), **{k: v for k, v in facts.items() if k.startswith("run.")}}
    if values.get("settings.cache") in (None, False):
        values["settings.cache"] = "none"
    notes = report.setting_notes(facts, prof.args if prof.mode == "args" else None)
    rows = list(keys)
    if prof.ranks:
        rows.insert(rows.index(("median step", "summary.step_s_median")) + 1, ("ranks", "summary.world_size"))
        rows += [(f"rank {r.get('rank')}", f"ranks.{r.get('rank')}") for r in prof.ranks]
    window = (prof.summary or {}).get("window") or {}
    if window.get("valid") is False:
        rows = [("rate (not steady)", k) if k == "summary.images_per_s" else (label, k) for label, k in rows]
        notes["summary.images_per_s"] = "no steady window: not the training's rate (see the verdict)"
    elif window.get("in_warmup"):
        notes["summary.images_per_s"] = "measured in the warm-up, whose optimizer steps come more often: the rate " \
                                        "after it may be higher"
    return values, rows, notes


def run(words: list[str], *, steps: int | None, out: Path | None, as_json: bool, fail_on: Severity, trace: bool = True,
        loader_seconds: float = 8.0, command: list[str] | None = None, hz: float = 5.0,
        gpu_telemetry: bool = True, debug: bool = False) -> int:
    from yolodoctor import trainargs
    from yolodoctor.commands import preflight
    from yolodoctor.console import echo_to, status, stderr_console, stdout_console, training_status
    from yolodoctor.profiling.runner import Measurement, exit_code_for, run_profile
    from yolodoctor.profiling.watch import watching

    err = stderr_console()
    check_facts, args = None, None
    if command:
        preflight.check_interpreter(command)  # a Python without Ultralytics: exit 2, before any run directory
    else:
        with status(err, "reading the train arguments (loading Ultralytics)"):
            user = trainargs.parse_kv(words)
        preflight.require_data(user)
        args = {"model": trainargs.DEFAULT_CLS_MODEL if user.get("task") == "classify" else trainargs.DEFAULT_MODEL,
                **user}
        from yolodoctor.check.environment import env_flag
        from yolodoctor.errors import InputError

        why = preflight.missing_model(str(args["model"]), offline=env_flag("YOLO_OFFLINE"))
        if why:
            raise InputError(why)
        from yolodoctor.check.run import quick_check

        with status(err, "checking the dataset, the machine and the settings"):
            check_facts = quick_check(user, trainargs.effective(user))  # a data.yaml that cannot load: exit 2
    # a script's own output is the user's; the training child's in KEY=VALUE mode is Ultralytics' (quiet) log and
    # torch's warnings: shown under --debug only, always kept in the run directory's output.log
    echo = echo_to(err) if command or debug else None
    with training_status(err, "profiling") as show, watching(progress=show, echo=echo, debug=debug):
        run_dir, prof = run_profile(args, command=command, check_facts=check_facts, out=out,
                                    measure=Measurement(steps=None if steps == -1 else (steps or "auto"), hz=hz,
                                                        trace=trace, loader_seconds=loader_seconds,
                                                        gpu_telemetry=gpu_telemetry, whole_if_short=True),
                                    log=lambda m: err.print(f"[dim]{m}[/]"))
    if command and prof.check_facts is None and exit_code_for(prof) not in (130, 143):
        with status(err, "checking the dataset the training opened"):
            _check_what_the_script_trained(run_dir, prof, lambda m: err.print(f"[dim]{m}[/]"))
    from yolodoctor.diagnosis.diagnose import diagnose
    from yolodoctor.presentation.verdict import verdict

    diag = diagnose(run_dir)
    findings = diag.reported
    v = verdict(diag.facts, findings, run_dir, prof)
    if as_json:
        report.dump_json(report.envelope("profile", findings, diag.facts, run_dir=str(run_dir),
                                         profile=prof.model_dump(by_alias=True, mode="json"), verdict=v.to_dict()))
    else:
        o = stdout_console()
        o.rule(f"[bold]yolodoctor profile: {run_dir}")
        report.render_verdict(o, v)
        values, rows, notes = summary_rows(prof, diag.facts)
        if wall := report.wall_line(prof.summary or {}):
            values["wall"] = wall
            rows.append(("wall time", "wall"))
        report.render_facts(o, values, rows, notes)
        report.render_findings(o, findings, "Diagnosis (most time saved first)", group=False)
        if v.next:
            from rich.markup import escape

            o.print(f"next: [cyan]{escape(v.next)}[/]")
    code = exit_code_for(prof)
    return code if code else exit_code(findings, fail_on)


def _check_what_the_script_trained(run_dir: Path, prof: Profile, log: Callable[[str], None]) -> None:
    """Script mode: `check`'s quick probes (the dataset, a warm decode sample, the RAM the cache needs, the storage)
    on the dataset the program's training opened, read off its effective settings, as args mode runs them before the
    training; saved into the record's check_facts. A dataset that cannot be read there is said and left out."""
    from yolodoctor import trainargs
    from yolodoctor.check.run import quick_check
    from yolodoctor.errors import YoloDoctorError

    st = prof.settings or {}
    if not st.get("data"):
        return
    user: dict[str, Any] = {"data": st["data"], "imgsz": st.get("imgsz"), "batch": st.get("batch"),
                            "workers": st.get("workers_requested", st.get("workers")),
                            "cache": st.get("cache_requested") or False, "task": st.get("task"),
                            "model": st.get("model"), "device": st.get("device")}
    user = {k: v for k, v in user.items() if v not in (None, "")}
    if str(user.get("device", "")).startswith("cuda:"):
        user["device"] = user["device"].split(":", 1)[1]
    try:
        prof.check_facts = quick_check(user, trainargs.effective(user))
    except (YoloDoctorError, OSError, ValueError) as e:
        log(f"the dataset {st['data']} the training opened could not be checked: {e}")
        return
    prof.save(run_dir)
