"""What `fix --verify` trials: the candidates a plan gives (each change on what it requires, the safe fallbacks, the
plan whole and its safe part), and what a trial ran differently from what was asked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from yolodoctor.fixing.planner import LOADER_REASON, LOADER_SIDE, Change, ChangeSet, Plan, accumulate, requirements
from yolodoctor.record.settings import Settings


@dataclass
class Candidate(ChangeSet):
    name: str
    changes: list[Change]
    against: str = "baseline"  # the candidate its gain is measured over (the one holding what it requires)
    whole: bool = False  # a whole set (the plan, its safe part): it comes in only measured together, never merged


def candidates(plan: Plan) -> list[Candidate]:
    """The baseline first; then each change on top of what it ``requires`` (followed transitively), each judged
    against the candidate holding exactly that (else the baseline); the safe fallbacks; and, where no candidate holds
    them already, the whole plan and its safe part (whole candidates). Where the planner added workers for the
    loader's ceiling (LOADER_REASON), every other change but the loader side is stacked on those workers, on the
    usable safe fallback of what they rest on, and judged against them; with no usable fallback nothing is stacked."""
    w = next((c for c in plan.changes if c.kind == "args" and c.key == "workers" and c.reason == LOADER_REASON), None)
    world = list(plan.changes)  # where the stacked candidates are built
    below = requirements(w, plan.changes) if w is not None else []  # what the workers change rests on
    for u in below:
        if u.changes_training:
            f = next((f for f in plan.fallbacks if (f.kind, f.key) == (u.kind, u.key) and _usable(f, plan)), None)
            if f is None:
                w = None  # stacked on an unsafe change, every change would share its loss parity: stack nothing
                break
            world = [f if c is u else c for c in world]
    lifted = [*requirements(w, world), w] if w is not None else []
    out = [Candidate("baseline", [])]
    needed: dict[str, list[Change]] = {}

    def add(needs: list[Change], c: Change) -> None:
        name = "+".join(f"{d.key}={d.after}" for d in [*needs, c])
        if name not in needed:
            out.append(Candidate(name, [*needs, c]))
            needed[name] = needs

    for c in plan.changes:
        if lifted and all(c is not d for d in [*lifted, *below]) and c.key not in LOADER_SIDE:
            add([*lifted, *(d for d in requirements(c, world) if all(d is not x for x in lifted))], c)
        else:
            add(requirements(c, plan.changes), c)
    if lifted:
        add(lifted[:-1], lifted[-1])  # (the workers) the reference of the stacked candidates (on the fallback, where
        # there is one)
    out += [Candidate(f"{c.key}={c.after}", [c]) for c in plan.fallbacks
            if f"{c.key}={c.after}" not in {x.name for x in out}]
    # every reference exists: what a candidate requires is itself a candidate, built on what its last change requires
    # (compile as the workers' driver: batch=64+compile under batch=64+compile+workers)
    for cand in out[1:]:
        needs = needed.get(cand.name) or []
        while needs and not any(same_changes(o.changes, needs) for o in out):
            add(needs[:-1], needs[-1])
            needs = needs[:-1]
    for cand in out[1:]:
        needs = needed.get(cand.name) or []
        cand.against = next((o.name for o in out if needs and same_changes(o.changes, needs)), "baseline")
    if len(plan.changes) > 1 and not any(same_changes(c.changes, plan.changes) for c in out):
        out.append(Candidate("plan", list(plan.changes), whole=True))
    safe = _safe_part(plan, lifted)
    if len(safe) > 1 and not any(same_changes(c.changes, safe) for c in out):
        out.append(Candidate("+".join(f"{d.key}={d.after}" for d in safe), safe, whole=True))
    return out


def _safe_part(plan: Plan, lifted: list[Change]) -> list[Change]:
    """The plan with each change to training replaced by its usable safe fallback, or left out where it has none
    (and so each change that requires a change left out), lifted changes first: the plan without --allow-unsafe's
    changes."""
    subs = {id(c): next((f for f in plan.fallbacks if (f.kind, f.key) == (c.kind, c.key) and _usable(f, plan)), None)
            for c in plan.changes if c.changes_training}
    if not subs:
        return list(plan.changes)
    replaced = [subs.get(id(c), c) if c.changes_training else c for c in plan.changes]
    out = [c for c in replaced if c is not None]
    while bad := [c for c in out if any(k not in {d.key for d in out} for k in c.requires)]:
        out = [c for c in out if all(c is not b for b in bad)]
    first = [c for c in lifted if any(c is d for d in out)]
    return [*first, *(c for c in out if all(c is not d for d in first))]


def _usable(f: Change, plan: Plan) -> bool:
    """A fallback at which the plan's other changes can run: no CUDA graphs with gradient accumulation
    (pytorch/pytorch#169545)."""
    graphs = any(c.kind == "args" and c.key == "compile" and c.after == "reduce-overhead" for c in plan.changes)
    return not (graphs and f.kind == "args" and f.key == "batch" and isinstance(f.after, (int, float))
                and accumulate(plan.nbs, f.after) > 1)


def same_changes(a: list[Change], b: list[Change]) -> bool:
    """The same change objects, in any order."""
    return len(a) == len(b) and all(any(x is y for y in b) for x in a)


def mismatches(asked: dict[str, Any], settings: Settings) -> list[str]:
    """What ran differently from what was asked (read off the trial's effective settings)."""
    out = []
    if "batch" in asked and isinstance(asked["batch"], int) and asked["batch"] > 0 and settings.get("batch") and \
            settings["batch"] != asked["batch"]:
        out.append(f"batch {asked['batch']} asked, {settings['batch']} ran (halved after out-of-memory)")
    if asked.get("compile") and settings.get("compile_active") is False:
        out.append(f"compile={asked['compile']!r} asked, the model ran eager (compile fell back)")
    if asked.get("amp") not in (None, False, "fp32") and settings.get("amp") is False:
        out.append(f"amp={asked['amp']!r} asked, training ran in float32 (AMP check failed or CPU)")
    if "workers" in asked and settings.get("workers") is not None and settings["workers"] < asked["workers"]:
        out.append(f"workers={asked['workers']} asked, {settings['workers']} ran (Ultralytics' clamp)")
    return out
