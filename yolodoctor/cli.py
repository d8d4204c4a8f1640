"""Command line (click). Exit codes: 0 ok, 1 findings at or above --fail-on, 2 could not run, 130 interrupted."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from yolodoctor.console import stdout_console
from yolodoctor.errors import UsageError, YoloDoctorError
from yolodoctor.findings import Severity
from yolodoctor.ulenv import quiet_ultralytics
from yolodoctor.version import __version__

FAIL_ON = click.Choice(["info", "warning", "error"])


class FiniteRange(click.FloatRange):
    """A float range that refuses nan (click's bounds compare false with it, so it passes them) and infinities."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        import math

        rv = super().convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return rv


class Ctx:
    def __init__(self, debug: bool, command: list[str]) -> None:
        self.debug = debug
        self.command = command  # words after `--`


def no_command(ctx: Ctx, name: str) -> None:
    if ctx.command:
        raise UsageError(f"`{name}` takes no `-- COMMAND`")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="yolodoctor")
@click.option("--debug", is_flag=True, help="Show tracebacks, and the training process's whole output (torch's and the "
                                            "profiler's own log included).")
@click.pass_context
def cli(click_ctx: click.Context, debug: bool) -> None:
    """Find out why an Ultralytics YOLO training run is slow, and fix it."""
    click_ctx.obj = Ctx(debug, (click_ctx.obj or {}).get("command", []))
    quiet_ultralytics()


@cli.command()
@click.argument("train_args", nargs=-1, metavar="[KEY=VALUE]...")
@click.option("--json", "as_json", is_flag=True, help="Print only JSON on stdout.")
@click.option("--fail-on", type=FAIL_ON, default="error", show_default=True, help="Exit 1 at or above this severity.")
@click.option("--warm", is_flag=True, help="Measure reads warm (skip dropping the sample from the page cache).")
@click.option("--torch-flag", "torch_flags", multiple=True, metavar="NAME=VALUE",
              help="A torch.backends flag your script sets, e.g. cudnn.benchmark=true (repeatable).")
@click.option("--rules", "rule_dirs", multiple=True, type=click.Path(path_type=Path), help="Add a folder of rules.")
@click.pass_obj
def check(ctx: Ctx, train_args: tuple[str, ...], as_json: bool, fail_on: str, warm: bool,
          torch_flags: tuple[str, ...], rule_dirs: tuple[Path, ...]) -> None:
    """Examine environment, dataset, storage, memory and configuration before training."""
    no_command(ctx, "check")
    from yolodoctor.commands.check import parse_torch_flags, run

    sys.exit(run(list(train_args), as_json=as_json, fail_on=Severity.parse(fail_on), cold=not warm,
                 torch_flags=parse_torch_flags(torch_flags), rule_dirs=list(rule_dirs)))


@cli.command()
@click.argument("train_args", nargs=-1, metavar="[KEY=VALUE]...")
@click.option("--steps", type=click.IntRange(1), default=None,
              help="Stop after N steps, skipping the validation and saving that follow [default: settle + the"
                   " loader's prefetch depth + two minimal windows, more while its queue still drains]. Use --all for"
                   " the whole run.")
@click.option("--all", "whole", is_flag=True, help="Profile the whole run, validation included.")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Run directory (must not exist).")
@click.option("--no-trace", is_flag=True, help="Skip the torch.profiler window.")
@click.option("--sample-hz", type=FiniteRange(0, 1000), default=5.0, show_default=True,
              help="Sampler rate (CPU, disk, memory, GPU); 0 turns the sampler off.")
@click.option("--no-gpu-telemetry", is_flag=True, help="Sample without NVML queries.")
@click.option("--loader-seconds", type=FiniteRange(0, 3600), default=8.0, show_default=True,
              help="Time the train loader alone after the steps (0: skip).")
@click.option("--json", "as_json", is_flag=True, help="Print only JSON on stdout.")
@click.option("--fail-on", type=FAIL_ON, default="error", show_default=True)
@click.option("--monitor", "live", is_flag=True, help="Watch the training in the monitor TUI while it runs.")
@click.pass_obj
def profile(ctx: Ctx, train_args: tuple[str, ...], steps: int | None, whole: bool, out: Path | None, no_trace: bool,
            sample_hz: float, no_gpu_telemetry: bool, loader_seconds: float, as_json: bool, fail_on: str,
            live: bool) -> None:
    """Run (part of) the real training under measurement and write a run directory."""
    if ctx.command and train_args:
        raise UsageError("give either KEY=VALUE train arguments or `-- COMMAND`, not both")
    if whole and steps:
        raise UsageError("--steps and --all exclude each other")
    if live:
        if as_json:
            raise UsageError("--monitor and --json exclude each other")
        from yolodoctor.commands.monitor import run as run_monitor

        options = (["--all"] if whole else ["--steps", str(steps)] if steps else []) + (
            ["--no-trace"] if no_trace else []) + (["--no-gpu-telemetry"] if no_gpu_telemetry else []) + [
            "--sample-hz", str(sample_hz), "--loader-seconds", str(loader_seconds), "--fail-on", fail_on]
        sys.exit(run_monitor(list(train_args), ctx.command, refresh=1.0, out=out, profile_options=options))
    from yolodoctor.commands.profile import run

    sys.exit(run(list(train_args), command=ctx.command, steps=-1 if whole else steps, out=out, trace=not no_trace,
                 loader_seconds=loader_seconds, hz=sample_hz, gpu_telemetry=not no_gpu_telemetry, as_json=as_json,
                 fail_on=Severity.parse(fail_on), debug=ctx.debug))


@cli.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print only JSON on stdout.")
@click.option("--rules", "rule_dirs", multiple=True, type=click.Path(path_type=Path), help="Add a folder of rules.")
@click.option("--fail-on", type=FAIL_ON, default="error", show_default=True)
@click.option("--explain", is_flag=True, help="Also say why each silent rule stayed silent.")
@click.pass_obj
def diagnose(ctx: Ctx, run_dir: Path, as_json: bool, rule_dirs: tuple[Path, ...], fail_on: str, explain: bool) -> None:
    """Re-run the rules on a saved profile."""
    no_command(ctx, "diagnose")
    from yolodoctor.commands.diagnose import run_diagnose

    sys.exit(run_diagnose(run_dir, rule_dirs=list(rule_dirs), as_json=as_json, fail_on=Severity.parse(fail_on),
                          explain=explain))


@cli.command()
@click.argument("rule_id", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print only JSON on stdout.")
@click.option("--rules", "rule_dirs", multiple=True, type=click.Path(path_type=Path), help="Add a folder of rules.")
@click.option("--facts", is_flag=True, help="List the facts rules can use.")
@click.pass_obj
def rules(ctx: Ctx, rule_id: str | None, as_json: bool, rule_dirs: tuple[Path, ...], facts: bool) -> None:
    """List the rules, or print one rule's documentation."""
    no_command(ctx, "rules")
    from yolodoctor.commands.diagnose import run_rules

    sys.exit(run_rules(rule_id, rule_dirs=list(rule_dirs), as_json=as_json, facts=facts))


@cli.command()
@click.argument("run_a", type=click.Path(path_type=Path))
@click.argument("run_b", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print only JSON on stdout.")
@click.option("--html", type=click.Path(path_type=Path), default=None,
              help="Also write a self-contained HTML report (only replaces a report compare wrote before).")
@click.pass_obj
def compare(ctx: Ctx, run_a: Path, run_b: Path, as_json: bool, html: Path | None) -> None:
    """Before (RUN_A) and after (RUN_B): figures, ratios, findings resolved and new."""
    no_command(ctx, "compare")
    from yolodoctor.commands.compare import run_compare

    sys.exit(run_compare(run_a, run_b, as_json=as_json, html=html))


@cli.command()
@click.argument("target", nargs=-1, metavar="[RUN_DIR | KEY=VALUE...]")
@click.option("--refresh", type=FiniteRange(0.1, 3600), default=1.0, show_default=True, help="Seconds between updates.")
@click.option("--steps", type=click.IntRange(1), default=None,
              help="Bound a training it launches to N steps [default: the whole run].")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Run directory of a training it launches (must not exist).")
@click.pass_obj
def monitor(ctx: Ctx, target: tuple[str, ...], refresh: float, steps: int | None, out: Path | None) -> None:
    """Live TUI: GPU, CPU, disk, training and findings of a run directory, of a training it launches (KEY=VALUE or
    `-- COMMAND`), or of the machine alone."""
    from yolodoctor.commands.monitor import run as run_monitor

    sys.exit(run_monitor(list(target), ctx.command, refresh=refresh, steps=steps, out=out))


@cli.command()
@click.argument("run_dir", type=click.Path(path_type=Path), required=False)
@click.option("--allow-unsafe", is_flag=True, help="Also plan changes that change training or need a trial.")
@click.option("--verify", is_flag=True, help="Run interleaved A/B trials; keep only what measurably helps.")
@click.option("--apply", is_flag=True, help="Relaunch the whole training with the plan (rolls back on failure).")
@click.option("--try", "tries", multiple=True, metavar="KEY=VALUE", help="Also try this change (repeatable).")
@click.option("--reps", type=click.IntRange(1, 9), default=2, show_default=True, help="Repeats of each trial.")
@click.option("--max-reps", type=click.IntRange(1, 9), default=4, show_default=True,
              help="Repeats a candidate may reach while its gain is within the noise (only those run again).")
@click.option("--budget", type=click.FloatRange(min=1), default=None, metavar="SECONDS",
              help="Fit --verify's trials into this many seconds [default: what the planned training can pay back: "
                   "a quarter of what the plan can save for 10 epochs or more, all of it for a shorter training].")
@click.option("--probe-applied", is_flag=True,
              help="Record the applied training as `profile` does (profiler trace, loader timing) [default: its "
                   "steps, wall phases and 1 Hz samples only].")
@click.option("--yes", is_flag=True, help="Replay a run directory recorded on another machine.")
@click.option("--json", "as_json", is_flag=True, help="Print only JSON on stdout.")
@click.option("--rules", "rule_dirs", multiple=True, type=click.Path(path_type=Path), help="Add a folder of rules.")
@click.pass_obj
def fix(ctx: Ctx, run_dir: Path | None, allow_unsafe: bool, verify: bool, apply: bool, tries: tuple[str, ...],
        reps: int, max_reps: int, budget: float | None, probe_applied: bool, yes: bool, as_json: bool,
        rule_dirs: tuple[Path, ...]) -> None:
    """Plan the changes that remove the findings of a run (default: the latest); verify and apply them."""
    no_command(ctx, "fix")
    from yolodoctor.commands.fix import run
    from yolodoctor.fixing.fix import FixOptions

    sys.exit(run(run_dir, FixOptions(verify=verify, apply=apply, allow_unsafe=allow_unsafe, tries=list(tries),
                                     reps=reps, max_reps=max_reps, yes=yes, budget=budget, debug=ctx.debug,
                                     probe_applied=probe_applied, rule_dirs=list(rule_dirs)), as_json=as_json))


@cli.command("make-dataset")
@click.argument("out_dir", type=click.Path(path_type=Path))
@click.option("--images", default=64, show_default=True, type=click.IntRange(1), help="Training images.")
@click.option("--val-images", type=click.IntRange(1), default=None,
              help="Validation images [default: images/5, >=2; classify: >= classes].")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0))
@click.option("--task", type=click.Choice(["detect", "segment", "pose", "obb", "classify"]), default="detect",
              show_default=True, help="classify: DIR/train/<class>/ and DIR/val/<class>/ folders, no data.yaml.")
@click.option("--format", "image_format", type=click.Choice(["jpg", "png"]), default="jpg", show_default=True)
@click.option("--size", default="640x480", show_default=True, help="Image WIDTHxHEIGHT.")
@click.option("--classes", default=3, show_default=True, type=click.IntRange(1, 1000))
@click.option("--workers", type=click.IntRange(1), default=None, help="Processes [default: usable cores].")
@click.option("--force", is_flag=True, help="Replace a dataset this command made before (never other files).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def make_dataset(ctx: Ctx, out_dir: Path, images: int, val_images: int | None, seed: int, task: str,
                 image_format: str, size: str, classes: int, workers: int | None, force: bool, as_json: bool) -> None:
    """Write a synthetic YOLO dataset (deterministic by seed) with a data.yaml, or class folders (--task classify)."""
    no_command(ctx, "make-dataset")
    from yolodoctor.commands.make_dataset import run

    sys.exit(run(out_dir, images=images, val_images=val_images, seed=seed, task=task, image_format=image_format,
                 size=size, classes=classes, workers=workers, force=force, as_json=as_json))


@cli.command()
@click.option("--dir", "work_dir", type=click.Path(path_type=Path), default=Path("runs/yolodoctor/demo-data"),
              show_default=True, help="Where the demo dataset is written (reused when present).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def demo(ctx: Ctx, work_dir: Path, as_json: bool) -> None:
    """The whole product on a planted bottleneck: check, profile, diagnose, fix --verify (a minute or two, 2 cores)."""
    no_command(ctx, "demo")
    from yolodoctor.commands.demo import run

    sys.exit(run(work_dir, as_json=as_json, debug=ctx.debug))


def split_command(argv: list[str]) -> tuple[list[str], list[str]]:
    """Words before `--` go to click; words after are the program to profile."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    words, command = split_command(argv)
    debug = "--debug" in words
    try:
        rc = cli.main(args=words, prog_name="yolodoctor", standalone_mode=False, obj={"command": command})
        sys.exit(rc or 0)
    except click.exceptions.Exit as e:  # --help, --version
        sys.exit(e.exit_code)
    except click.exceptions.NoArgsIsHelpError as e:  # bare `yolodoctor`: the commands, as --help shows them
        stdout_console().print(e.format_message(), markup=False)
        sys.exit(2)
    except click.ClickException as e:  # usage errors: one line
        _fail(e.format_message(), 2)
    except click.exceptions.Abort:
        _fail("interrupted", 130)
    except YoloDoctorError as e:
        if debug:
            raise
        _fail(str(e), e.exit_code)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except SystemExit:
        raise
    except Exception as e:  # a bug: one line unless --debug
        if debug:
            raise
        _fail(f"internal error ({type(e).__name__}: {e}); rerun with --debug for the traceback", 2)


def _fail(message: str, code: int) -> None:
    message = " ".join(str(message).split())
    sys.stderr.write(f"yolodoctor: error: {message}\n")
    sys.stderr.flush()
    sys.exit(code)


