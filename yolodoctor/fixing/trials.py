"""`fix --verify`'s running: the trial rounds (every candidate ``reps`` times in interleaved ABBA order, then a round
at a time for what is undecided, up to ``max_reps``) and one trial, a bounded profile of the user's training."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from yolodoctor.fixing.candidates import Candidate, candidates, mismatches
from yolodoctor.fixing.judge import judge, loss_settled, undecided, unmeasured
from yolodoctor.fixing.parity import opt_points
from yolodoctor.fixing.planner import Plan
from yolodoctor.fixing.records import TrialReport, TrialRun


def run_trials(base_args: dict[str, Any], plan: Plan, *, out_dir: Path, reps: int = 2, max_reps: int | None = None,
               steps: int | str = "auto", base_env: dict[str, str] | None = None,
               log: Callable[[str], None] = lambda m: None, command: list[str] | None = None,
               trial: Callable[..., TrialRun] | None = None, planned_images: float | None = None,
               seed: int = 0, cands: list[Candidate] | None = None) -> TrialReport:
    """``command``: a script-mode run; each trial runs the program unedited with the candidate's arguments
    merged into its trainers (profiling/inject). ``max_reps`` (default ``reps``): repeats a candidate held back by
    noise alone may reach. ``trial(candidate, rep, run_dir)``: runs one trial (default: a bounded profile, repeat
    ``rep`` with seed ``seed + rep``, so that the repeats of unchanged training measure how much its loss varies).
    ``planned_images``: the user's training's images, against which one-off costs are weighed (judge)."""
    if reps < 1:
        raise ValueError(f"reps must be at least 1, not {reps}")
    out_dir.mkdir(parents=True, exist_ok=True)
    one = trial or (lambda c, rep, run_dir: _profile_trial(c, rep, run_dir, base_args, steps, base_env, command,
                                                           seed + rep))
    return rounds(cands if cands is not None else candidates(plan), one, reps=reps, max_reps=max_reps,
                  out_dir=out_dir, log=log, planned_images=planned_images)


def rounds(cands: list[Candidate], one: Callable[..., TrialRun], *, reps: int, max_reps: int | None = None,
           out_dir: Path = Path("."), log: Callable[[str], None] = lambda m: None,
           planned_images: float | None = None) -> TrialReport:
    """The trials' rounds: every candidate ``reps`` times, then one round at a time for what is undecided, up to
    ``max_reps``; ``one(candidate, rep, run_dir)`` runs a trial (or replays a recorded one)."""
    runs: list[TrialRun] = []
    todo, rep, settled = cands, 0, set()
    t0 = time.monotonic()
    while todo:
        # interleaved ABBA: B c1 ... P, then P ... c1 B, so that a steady drift of the machine (or a position effect
        # such as the page cache a previous trial warmed) falls on every candidate alike
        for c in (todo if rep % 2 == 0 else todo[::-1]):
            log(f"trial {rep + 1}/{reps if rep < reps else max_reps}: {c.name}")
            runs.append(one(c, rep, out_dir / f"{_slug(c.name)}-{rep + 1}"))
        rep += 1
        moved = {n: why for n, why in loss_settled(runs, cands).items() if n not in settled}
        if moved:
            log(f"not repeated, the loss settles them: {'; '.join(f'{n} ({why})' for n, why in moved.items())}")
            settled |= set(moved)
        if rep < reps:
            todo = [c for c in todo if c.name not in settled]
            continue
        verdicts, spread, kept, noise = judge(runs, cands, planned_images)
        todo = [c for c in undecided(verdicts, cands) if c.name not in settled] if rep < (max_reps or reps) else []
        if todo:
            log(f"more repeats to decide {', '.join(v.candidate for v in verdicts if v.inconclusive)}: within the "
                "noise so far")
    if (combo := unmeasured(cands, kept)) is not None:  # applied must be measured: the kept changes together
        log(f"the kept changes were measured apart: trialling them together ({combo.name.split(':', 1)[1]})")
        cands = [*cands, combo]
        for r in range(reps):
            log(f"trial {r + 1}/{reps}: {combo.name}")
            runs.append(one(combo, r, out_dir / f"{_slug(combo.name)}-{r + 1}"))
        verdicts, spread, kept, noise = judge(runs, cands, planned_images)
    return TrialReport(runs, verdicts, spread, kept, noise, round(time.monotonic() - t0, 1))  # judged after the last


def _profile_trial(c: Candidate, rep: int, run_dir: Path, base_args: dict[str, Any], steps: int | str,
                   base_env: dict[str, str] | None, command: list[str] | None, seed: int) -> TrialRun:
    from yolodoctor.errors import Interrupted
    from yolodoctor.profiling.runner import Measurement, run_profile, stopped_by_signal

    run, prof = run_profile(None if command else dict(base_args), command=command, overrides={**c.args, "seed": seed},
                            measure=Measurement(steps=steps, trace=False, loader_seconds=0), out=run_dir,
                            env_extra={**(base_env or {}), **c.env}, torch_flags=c.torch_flags)
    if (code := stopped_by_signal(prof)) is not None:  # Ctrl-C / SIGTERM: no further trials
        raise Interrupted(f"{prof.reason}: fix --verify stopped; the trial so far is saved in {run}", code)
    s = prof.summary or {}
    w = s.get("window") or {}
    return TrialRun(candidate=c.name, rep=rep, run_dir=str(run), status=prof.status, reason=prof.reason,
                    images_per_s=s.get("images_per_s"), window_valid=w.get("valid"),
                    mismatch=mismatches(c.args, prof.settings or {}), loss_curve=_loss_curve(run),
                    host_ms=((prof.host_probe or {}).get("before") or {}).get("python_ms"), window_why=w.get("why"),
                    one_off_s=s.get("one_off_s"), seed=seed, phases=s.get("phases"))


def _loss_curve(run: Path) -> list[tuple[int, float]] | None:
    from yolodoctor.record.events import read_events
    from yolodoctor.record.summary import steps_of

    try:
        steps = sorted((e for e in steps_of(read_events(run / "events.jsonl")) if e.get("train_index", 0) == 0),
                       key=lambda e: e["step"])
    except (OSError, ValueError, KeyError):
        return None
    return opt_points(steps) or None


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)[:60]
