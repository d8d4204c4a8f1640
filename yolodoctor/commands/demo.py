"""`yolodoctor demo`: the whole product on a planted bottleneck, on whatever device is present (a CPU will do), in
about a minute and a half on two cores.

The demo dataset is made slow to load on purpose: large PNG images (1280x960, noisy, so barely compressed), each
decoded again every time the loader needs it, for a tiny model at imgsz 64 that computes a step quickly. On the CPU
Ultralytics loads in the training process (workers=0), so the step waits for that decoding. The batch is 2, so that
Ultralytics' mosaic buffer (the last 8 x batch images stay decoded in memory) holds a quarter of the 64 images: most
images are decoded again. `check` measures the decode cost, `profile` finds the step waiting for data, the rules
propose cache='ram' (images decoded once), and `fix --verify`'s own trials - two repeats each of the baseline and the
change, interleaved, bounded to 40 steps - measure what it gains. The demo ends with what to run on your own data.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

from yolodoctor.findings import Finding, Severity, exit_code
from yolodoctor.presentation import report

if TYPE_CHECKING:
    from rich.console import Console

    from yolodoctor.fixing.candidates import Candidate
    from yolodoctor.fixing.records import TrialReport

DEMO_DATASET = {"images": 64, "val_images": 4, "seed": 0, "task": "detect", "image_format": "png",
                "width": 1280, "height": 960}
# epochs=20 keeps mosaic on in the measured epoch and gives the plan a training to save time over (20 x 64 images)
DEMO_ARGS = ["model=yolo11n.yaml", "imgsz=64", "batch=2", "epochs=20", "plots=False"]
STEPS = 60  # settle (20) + a 40-step window (halves of 20 agree on a busy machine): the profile and every trial
LOADER_SECONDS = 2.0
REPS = 2  # two repeats of each trial: the second measures the machine's noise

NEXT = [("yolodoctor check data=your.yaml model=yolo11n.pt", "before training"),
        ("yolodoctor profile data=your.yaml model=yolo11n.pt", "measure the real training"),
        ("yolodoctor fix --verify --apply", "trial the plan, relaunch with what helps")]


def _matches(work_dir: Path) -> bool:
    """The folder holds a complete demo dataset made with today's options."""
    try:
        marker = json.loads((work_dir / ".yolodoctor-dataset").read_text())
    except (OSError, ValueError):
        return False
    opts = marker.get("options") or {}
    want = {k: DEMO_DATASET[k] for k in ("task", "image_format", "width", "height")}
    return (marker.get("complete") is True and marker.get("seed") == DEMO_DATASET["seed"]
            and {k: opts.get(k) for k in want} == want
            and marker.get("counts") == {"train": DEMO_DATASET["images"], "val": DEMO_DATASET["val_images"]}
            and (work_dir / "data.yaml").is_file())


def ensure_dataset(work_dir: Path, err: Console) -> Path:
    """The demo dataset in ``work_dir``: reused when it is there, else written (replacing an older demo dataset, never
    anything else), with a progress bar."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from yolodoctor.commands.make_dataset import write_dataset

    if _matches(work_dir):
        err.print(f"[dim]reusing the demo dataset in {work_dir}[/]")
        return work_dir / "data.yaml"
    n, w, h = DEMO_DATASET["images"], DEMO_DATASET["width"], DEMO_DATASET["height"]
    err.print(f"[dim]writing the demo dataset to {work_dir}: {n} train images, {w}x{h} PNG (slow to decode on "
              "purpose)[/]")
    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=True, disable=not err.is_terminal) as bar:
        task = bar.add_task("writing images", total=None)
        info = write_dataset(work_dir, **DEMO_DATASET, force=(work_dir / ".yolodoctor-dataset").is_file(),
                             progress=lambda done, total: bar.update(task, completed=done, total=total))
    return Path(info.yaml_path)


def demo_candidates(cands: list[Candidate], findings: list[Finding]) -> list[Candidate]:
    """The trial design the demo has time for: the baseline and the candidate of the top finding's change alone."""
    from yolodoctor.findings import ranked

    top = next((f for f in ranked(findings) if f.fix and (f.fix.args or f.fix.env or f.fix.torch_flags)), None)
    if top is None or top.fix is None:
        return []
    keys = set(top.fix.args) | set(top.fix.env) | set(top.fix.torch_flags)
    mine = [c for c in cands[1:] if c.against == "baseline" and {x.key for x in c.changes} <= keys]
    return [cands[0], mine[0]] if mine else []


def busy_machine(trials: TrialReport) -> str:
    """What to make of a demo whose trials kept nothing: its bottleneck is planted, so the machine was too busy to
    measure it (its own speed moved, or a window never settled)."""
    moved = trials.host_spread
    return ("The planted bottleneck's fix was not confirmed on this machine as it ran"
            + (f" (its own speed moved {moved:.0%} across the trials: other programs running?)" if moved else "")
            + ": the trials stay honest and keep nothing they cannot tell from the noise. Run `yolodoctor demo` "
            "again when the machine is quieter.")


def run(work_dir: Path, *, as_json: bool, debug: bool = False) -> int:
    from yolodoctor import trainargs
    from yolodoctor.check.run import run_check
    from yolodoctor.commands.check import SUMMARY as CHECK_SUMMARY
    from yolodoctor.commands.fix import print_plan, print_trials
    from yolodoctor.commands.profile import summary_rows
    from yolodoctor.console import echo_to, status, stderr_console, stdout_console, training_status
    from yolodoctor.diagnosis.diagnose import diagnose
    from yolodoctor.fixing.fix import FixOptions, fix, speedups
    from yolodoctor.presentation.verdict import verdict
    from yolodoctor.profiling.runner import Measurement, run_profile
    from yolodoctor.profiling.watch import watching
    from yolodoctor.record.rundir import fresh_dir

    started = time.monotonic()
    err, out = stderr_console(), stdout_console()
    show = not as_json

    def log(message: str) -> None:
        err.print(f"[dim]{message}[/]")

    yaml_path = ensure_dataset(work_dir, err)
    with status(err, "loading Ultralytics"):
        user = trainargs.parse_kv([*DEMO_ARGS, f"data={yaml_path}"])
    args = trainargs.effective(user)
    with status(err, "checking the environment, the dataset and how fast its images read and decode") as update:
        rep = run_check(user, args, log=update)
    if show:
        out.rule("[bold]yolodoctor demo: check (before training)")
        report.render_facts(out, rep.facts, CHECK_SUMMARY)
        report.render_findings(out, rep.findings, "Check findings")

    base = work_dir.parent
    echo = echo_to(err) if debug else None
    with training_status(err, f"profiling {STEPS} steps of the training") as progress, \
            watching(progress=progress, echo=echo, debug=debug):
        run_dir, prof = run_profile({**user, "project": str(base / "demo-train")}, out=fresh_dir(base / "demo"),
                                    check_facts=rep.facts, log=log,
                                    measure=Measurement(steps=STEPS, trace=False, loader_seconds=LOADER_SECONDS))
    diag = diagnose(run_dir)
    v = verdict(diag.facts, diag.reported, run_dir, prof)
    if show:
        out.rule(f"[bold]yolodoctor demo: profile ({run_dir})")
        report.render_verdict(out, v)
        values, rows, notes = summary_rows(prof, diag.facts)
        report.render_facts(out, values, rows, notes)
        report.render_findings(out, diag.reported, "Diagnosis (most time saved first)", group=False)

    if show:
        out.rule(f"[bold]yolodoctor demo: fix --verify ({run_dir})")

    def choose(cands: list[Candidate], findings: list[Finding]) -> list[Candidate]:
        chosen = demo_candidates(cands, findings)
        if chosen:
            log(f"verifying {chosen[1].name}: {REPS} trials of it and of the baseline, interleaved, {STEPS} steps "
                "each")
        return chosen

    # the demo trials its top finding's change alone, as many steps as it profiled, whatever the budget
    r = fix(run_dir, FixOptions(verify=prof.status == "complete", reps=REPS, max_reps=REPS, debug=debug,
                                steps=STEPS, design=False, choose=choose), log=log, err=err,
            on_plan=(lambda p: print_plan(out, run_dir, p)) if show else None)
    p, trials, cands = r.plan, r.trials, r.cands
    if trials is not None:
        if show:
            print_trials(out, trials, cands, (prof.settings or {}).get("images_per_epoch"))
            kept = ", ".join(f"{c.key}={c.after!r}" for c in trials.kept)
            out.print(f"\n[bold]kept[/]: {kept}" if kept else "\n[bold]kept[/]: nothing (see why above)")
            if not trials.kept:
                out.print(f"[yellow]{busy_machine(trials)}[/]")
    elif show:
        out.print("[dim]nothing for the demo to trial[/]")
    wall = time.monotonic() - started
    if as_json:
        report.dump_json(report.envelope(
            "demo", rep.findings + diag.reported, {**rep.facts, **diag.facts}, run_dir=str(run_dir), args=user,
            verdict=v.to_dict(), plan=p.to_dict(), trials=trials.to_dict() if trials else None,
            speedups=speedups(trials, cands) if trials else {}, seconds=round(wall, 1)))
    else:
        out.rule("[bold]Next, on your own data")
        for line, what in NEXT:
            out.print(f"  [cyan]{line:<51}[/] [dim]{what}[/]")
        out.print(f"[dim]The demo took {wall:.0f} s; its runs are in {base}/ ({run_dir.name}, "
                  f"trials-{run_dir.name}).[/]")
    findings = rep.findings + diag.reported
    return exit_code(findings, Severity.error)
