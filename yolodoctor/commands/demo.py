"""`yolodoctor demo`: the main job on an embedded default — make a small synthetic dataset, check it, profile a short
training on whatever device is present, and report (diagnosis and plan join as the rule engine and planner land)."""

from __future__ import annotations

from pathlib import Path

from yolodoctor.presentation import report
from yolodoctor.findings import Severity, exit_code

DEMO_DATASET = {"images": 64, "val_images": 16, "seed": 0, "task": "detect", "image_format": "jpg",
                "width": 640, "height": 480}
DEMO_ARGS = ["model=yolo11n.yaml", "imgsz=160", "batch=8", "epochs=20"]  # the bound stops it; 20 keeps mosaic on


def ensure_dataset(work_dir: Path, log) -> Path:
    from yolodoctor.commands.make_dataset import write_dataset

    yaml_path = work_dir / "data.yaml"
    if (work_dir / ".yolodoctor-dataset").is_file() and yaml_path.is_file():
        log(f"reusing the demo dataset in {work_dir}")
        return yaml_path
    log(f"writing a synthetic dataset ({DEMO_DATASET['images']} train images) to {work_dir}")
    return Path(write_dataset(work_dir, **DEMO_DATASET).yaml_path)


def run(work_dir: Path, *, as_json: bool) -> int:
    from yolodoctor import trainargs
    from yolodoctor.check.run import run_check
    from yolodoctor.console import stderr_console, stdout_console

    err = stderr_console()
    yaml_path = ensure_dataset(work_dir, lambda m: err.print(f"[dim]{m}[/]"))
    user = trainargs.parse_kv([*DEMO_ARGS, f"data={yaml_path}"])
    args = trainargs.effective(user)
    with err.status("checking..."):
        rep = run_check(user, args)
    from yolodoctor.commands.profile import SUMMARY as PROFILE_SUMMARY, flat
    from yolodoctor.profiling.runner import run_profile

    err.print("[dim]profiling a short training (Ultralytics' log follows on stderr)...[/]")
    run_dir, prof = run_profile({**user, "plots": False, "project": str(work_dir.parent / "demo-train")},
                                out=None, log=lambda m: err.print(f"[dim]{m}[/]"))
    from yolodoctor.diagnosis.diagnose import diagnose

    diag = diagnose(run_dir)
    findings = rep.findings + diag.reported
    if as_json:
        report.dump_json(report.envelope("demo", findings, {**rep.facts, **diag.facts}, run_dir=str(run_dir),
                                         args=user))
    else:
        from yolodoctor.commands.check import SUMMARY

        out = stdout_console()
        out.rule("[bold]yolodoctor demo: check")
        report.render_facts(out, rep.facts, SUMMARY)
        report.render_findings(out, rep.findings, "Check findings")
        out.rule(f"[bold]yolodoctor demo: profile ({run_dir})")
        report.render_facts(out, flat(prof), PROFILE_SUMMARY)
        report.render_findings(out, diag.reported, "Diagnosis (most time saved first)",
                               group=False)
    return exit_code(findings, Severity.error)
