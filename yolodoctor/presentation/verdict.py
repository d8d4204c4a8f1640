"""The headline of a profile or a diagnosis: what bounds the training step, by how much, on what evidence, and what to
run next - derived from the facts and the ranked findings (a healthy run included: then nothing is worth fixing).

What bounds the step is decided once, by rules, never here:
  failed   how the run ended (ST203, ST204): the training did not finish, its figures say nothing of its speed;
  memory   it ran out of memory (MM201), or the top finding that costs time is a memory one;
  input    one DDP rank's loader paces them all (the finding DD201), or the bound rule BD201 (data wait);
  host, gpu, cpu   the bound rules BD202-BD204 (rules/BD*.yaml), which exclude each other.
The bound rules read the same facts and thresholds as the findings that act on them (tests/presentation checks that a
finding and the headline never disagree); the verdict only words the result and picks the next command.
"""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from yolodoctor.findings import Finding, Severity, ranked
from yolodoctor.record import bounds

BOUNDS = {"BD201": "input", "BD202": "host", "BD203": "gpu", "BD204": "cpu"}  # the bound rule's id: its bound

TITLES = {"input": "Input-bound (the data loader)", "host": "Host-bound (Python and kernel launches)",
          "gpu": "GPU compute-bound", "cpu": "Compute-bound on the CPU", "memory": "Memory-bound",
          "failed": "The training failed", "unknown": "Bound not determined"}


@dataclass
class Verdict:
    bound: str  # input | host | gpu | cpu | memory | failed | unknown
    share: float | None  # the bound's share of the step (memory: the GPU memory peak), where measured
    headline: str  # one sentence: the bound, its share, and why
    evidence: list[str] = field(default_factory=list)  # the facts behind it, in human units
    next: str | None = None  # the command to run next
    next_why: str | None = None
    healthy: bool = False  # nothing worth fixing
    caveat: str | None = None  # why the figures may not hold (no steady window, an interrupted run)

    @property
    def title(self) -> str:
        return TITLES[self.bound]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"title": self.title}


def pct(v: float) -> str:
    p = 100 * v
    return f"{p:.1f}%" if 0 < abs(p) < 10 else f"{p:.0f}%"


def _get(f: dict[str, Any], key: str) -> float | None:
    """A numeric fact, or None."""
    v = f.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _fix_args(x: Finding) -> bool:
    fx = x.fix
    return fx is not None and bool(fx.args or fx.env or fx.torch_flags)


def _actionable(x: Finding) -> bool:
    return x.severity >= Severity.warning and _fix_args(x)


def profile_again(profile: Any, steps: int | None = None) -> str | None:
    """The `yolodoctor profile` command line that reruns a recorded profile (args or script mode)."""
    if profile is None:
        return None
    opt = [f"--steps {steps}"] if steps else []
    if profile.mode == "script" and profile.command:
        return " ".join(["yolodoctor profile", *opt, "--", shlex.join(profile.command)])
    if profile.mode == "args":
        words = [shlex.quote(f"{k}={v}") for k, v in (profile.args or {}).items() if k not in ("project", "name")]
        return " ".join(["yolodoctor profile", *words, *opt])
    return None


def verdict(facts: dict[str, Any], findings: list[Finding], run_dir: str | Path | None = None,
            profile: Any = None) -> Verdict:
    """``findings``: what the command reports (how the run ended first, then the diagnosis); ``profile``: the run's
    record (yolodoctor.record.profile.Profile), for the command lines it suggests."""
    run = str(run_dir) if run_dir is not None else "RUN_DIR"
    ordered = ranked(findings)
    ending = [x for x in ordered if x.id in ("MM201", "ST203", "ST204")]
    reason = getattr(profile, "reason", None) or facts.get("end.reason")
    stopped = str(reason).startswith(("interrupted", "terminated"))
    if ending or (facts.get("run.complete") is False and reason and not stopped):
        return _failed(facts, ending, reason, run, profile)
    actionable = [x for x in ordered if _actionable(x)]
    v = _bound(facts, ordered, actionable)
    if facts.get("run.window_valid") is False:
        v.caveat = f"not a steady figure: {facts.get('run.window_why') or 'too few steps'}"
        if _profile_longer(v, profile):
            return v
    elif facts.get("run.complete") is False and reason:
        v.caveat = f"the profile was {str(reason).split(':')[0]} after {facts.get('end.steps') or 'a few'} steps"
    _next_step(v, ordered, actionable, run)
    if v.next and " --verify" in v.next and (where := foreign(profile)):
        v.next += " --yes"
        v.next_why = f"{v.next_why}; {where}" if v.next_why else where
    return v


def foreign(profile: Any) -> str | None:
    """What replaying a run recorded on another machine needs here, in a clause; None for a run recorded here."""
    from yolodoctor.record.profile import host_id

    host = getattr(profile, "host", None)
    if profile is None or not host or host == host_id():
        return None
    data = (getattr(profile, "args", None) or {}).get("data") or (getattr(profile, "settings", None) or {}).get("data")
    return (f"recorded on {host.rstrip('/')}: --yes replays its training here, which needs "
            + (f"its dataset at {data}" if data else "its dataset") + " on this machine")


def step_bound(facts: dict[str, Any]) -> Finding | None:
    """The bound rule (rules/BD*.yaml) that holds for ``facts``, or None where none can be judged."""
    from yolodoctor.diagnosis.engine import evaluate
    from yolodoctor.diagnosis.rules import bound_rules

    fired = evaluate(bound_rules(), facts)[0]
    return fired[0] if fired else None


def _bound(f: dict[str, Any], ordered: list[Finding], actionable: list[Finding]) -> Verdict:
    """What bounds the step (a finding or a bound rule), its share, its headline and evidence."""
    wait, device = _get(f, "run.data_wait_share"), f.get("run.device")
    ev: list[str] = []
    if wait is not None:
        step = _get(f, "run.step_s")
        ev.append(f"data wait {pct(wait)} of each step" + (f" (median step {_seconds(step)})" if step else ""))
    warned = [x for x in ordered if x.severity >= Severity.warning]
    top_memory = next((x for x in actionable + warned if x.category == "memory"), None)
    top = actionable[0] if actionable else None
    rule = step_bound(f)
    bound = BOUNDS.get(rule.id, "unknown") if rule is not None else "unknown"
    share: float | None = _get(rule.evidence, "share") if rule is not None else None
    headline = rule.message if rule is not None else ""
    straggler = next((x for x in ordered if x.id == "DD201"), None)
    if straggler is not None:  # under DDP one rank's loader paces them all
        bound, share = "input", _get(f, "ranks.wait_excess_share")
        headline = (f"rank {f['ranks.straggler']:.0f} waits {f['ranks.straggler_wait_ms']:.0f} ms per step for its "
                    f"data, the other ranks {f['ranks.others_wait_ms']:.0f} ms: every rank waits for it at the "
                    f"gradient all-reduce" + (f", {pct(share)} of each step" if share is not None else "")
                    if all(k in f for k in ("ranks.straggler", "ranks.straggler_wait_ms", "ranks.others_wait_ms"))
                    else straggler.message.split(". ")[0].rstrip("."))
        ev = [f"{f['ranks.count']:.0f} DDP ranks; rank 0's data wait {pct(wait)} of each step"
              if wait is not None else f"{f.get('ranks.count', 2):.0f} DDP ranks"]
        if _get(f, "ranks.straggler_workers") is not None and _get(f, "ranks.others_workers") is not None:
            ev.append(f"its loader ran {f['ranks.straggler_workers']:.0f} worker(s), the others' "
                      f"{f['ranks.others_workers']:.0f}")
    elif bound == "input":
        ev += _input_evidence(f, device)
    elif top is not None and top is top_memory:
        bound, share = "memory", _get(f, "gpu.mem_fraction_peak")
        headline = top.message.split(". ")[0].rstrip(".")
        if share is not None:
            ev.append(f"GPU memory peak {pct(share)} of the card")
    elif bound in ("host", "gpu"):
        if (thread := _get(f, "cpu.train_thread_pct")) is not None:
            ev.append(f"training thread at {thread:.0f}% of a core")
        if (kernels := _get(f, "trace.kernels_per_step")) is not None:
            ev.append(f"{kernels:.0f} kernels per step")
    elif bound == "unknown":
        headline = "the profile holds too few measurements to say what bounds the step"
    if (rate := _get(f, "run.images_per_s")) is not None:
        ev.insert(0, f"{rate:.1f} images/s" + (" (steady)" if f.get("run.window_valid") else ""))
    headline = " ".join(headline.split())
    return Verdict(bound, share, headline[:1].upper() + headline[1:] + ".", ev)


def _input_evidence(f: dict[str, Any], device: Any) -> list[str]:
    ev = []
    cap, rate = _get(f, "loader.capacity_images_per_s"), _get(f, "run.images_per_s")
    if cap is not None and rate is not None:
        ev.append(f"the loader alone delivers {cap:.1f} images/s, the training takes {rate:.1f}")
    if (decode := _get(f, "check.decode_ms")) is not None:
        ev.append(f"decoding one image takes {decode:.1f} ms on a core")
    if (workers := _get(f, "settings.workers")) is not None:
        ev.append(f"workers={workers:.0f}" + (" (on the CPU Ultralytics loads in the training process)"
                                              if device == "cpu" else ""))
    return ev


def _profile_longer(v: Verdict, profile: Any) -> bool:
    """A profile without a steady window: the next step is a longer profile (True where it could be written)."""
    summary = getattr(profile, "summary", None) or {}
    window = summary.get("window") or {}
    needs, steps, first = window.get("needs"), summary.get("steps"), window.get("first_step") or 0
    if isinstance(getattr(profile, "steps_limit", None), int):  # --steps N was given: the default runs enough
        again, why = profile_again(profile), "without --steps a profile runs until its window has settled"
    else:
        more = int(max(steps, first) + needs) if isinstance(steps, int) and isinstance(needs, int) else None
        if summary.get("bounded") is False and isinstance(steps, int):
            # a whole training too short for a window: a bounded profile runs on past its end (wrapping around the
            # dataset), at least as long as the default bound of its loader
            st = getattr(profile, "settings", None) or {}
            least = bounds.default_steps(int(st.get("workers") or 0), st.get("prefetch_factor"))
            more = max(more or 0, least, steps + bounds.MIN_WINDOW)
        again, why = profile_again(profile, more), "a longer profile measures a steady rate"
    if again:
        v.next, v.next_why = again, why
    return again is not None


def _next_step(v: Verdict, ordered: list[Finding], actionable: list[Finding], run: str) -> None:
    """The command to run next: fix --verify for what costs time, trials for what only a trial can judge; nothing for
    a healthy run."""
    warned = [x for x in ordered if x.severity >= Severity.warning]
    trial = [x for x in ordered if _fix_args(x)]
    if actionable:
        top = actionable[0]
        v.next = _verify(run, actionable)
        gain = top.fix.seconds_saved_per_epoch if top.fix else None
        v.next_why = (f"trials {top.id}'s {_change(top)}" + (f" (saves up to {gain:.1f} s per epoch)" if gain else "")
                      + (f" and {len(actionable) - 1} more" if len(actionable) > 1 else "")
                      + ", keeping only what measurably helps")
    elif not warned and v.bound in ("gpu", "cpu"):
        v.healthy = True
        v.next_why = "nothing worth fixing: no finding costs time; the step is the model's own compute"
    elif not warned and trial:
        v.next = _verify(run, trial)
        v.next_why = (f"no finding is sure to save time; trials tell whether {trial[0].id}'s {_change(trial[0])}"
                      + (f" or {len(trial) - 1} more" if len(trial) > 1 else "") + " helps")
    elif warned:
        w = warned[0]
        note = (w.fix.note or "").strip() if w.fix else ""
        v.next_why = f"{w.id} has no argument to change: " + (note or "see its finding below")


def _verify(run: str, changes: list[Finding]) -> str:
    unsafe = all(x.fix is not None and x.fix.safety == "unsafe" for x in changes)
    return f"yolodoctor fix {shlex.quote(run)} --verify" + (" --allow-unsafe" if unsafe else "")


def _failed(f: dict[str, Any], ending: list[Finding], reason: str | None, run: str, profile: Any) -> Verdict:
    first = ending[0] if ending else None
    what = (first.message if first else f"the training did not finish: {reason}").rstrip(".")
    steps = _get(f, "end.steps")
    v = Verdict("memory" if first is not None and first.id == "MM201" else "failed", None, what + ".",
                [f"status: {f.get('end.status') or getattr(profile, 'status', '?')}"]
                + ([f"{steps:.0f} steps before the end"] if steps is not None else []))
    if first is not None and _fix_args(first):
        v.next, v.next_why = f"yolodoctor fix {shlex.quote(run)}", f"plans {_change(first)}"
    else:
        again = profile_again(profile)
        if again and profile.mode == "args":
            v.next = again.replace("yolodoctor profile", "yolodoctor check", 1)
            v.next_why = "check finds the dataset and environment problems behind most failures"
        else:
            v.next_why = "read the reason above; fix it and profile again"
    return v


def _change(x: Finding) -> str:
    fx = x.fix
    if fx is None:
        return ""
    parts = [f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in fx.args.items()]
    parts += [f"{k}={v}" for k, v in fx.env.items()] + [f"torch.backends.{k}={v}" for k, v in fx.torch_flags.items()]
    return " ".join(parts)


def _seconds(s: float) -> str:
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.2f} s"
