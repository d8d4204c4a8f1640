"""Two run directories compared: before (A) and after (B).

The headline figures of both runs side by side with their ratio and difference, the findings that went away, appeared
or stayed (by rule id, from `diagnose()` on each run), and a warning whenever the comparison is not like for like (a
window too short to conclude, a different device, image size, model or dataset).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yolodoctor.diagnosis.diagnose import Diagnosis
from yolodoctor.findings import ranked
from yolodoctor.numbers import as_number as _num
from yolodoctor.presentation import report

if TYPE_CHECKING:
    from rich.console import Console

    from yolodoctor.diagnosis.rules import Compiled

# (fact, label, kind, which direction is better); kind picks the formatting (fmt below)
METRICS: list[tuple[str, str, str, str | None]] = [
    ("run.images_per_s", "steady images/s (training steps)", "rate", "higher"),
    ("run.wall_s", "wall time (whole run)", "seconds", "lower"),
    ("run.pause_s", "pauses (validation, epochs' ends)", "seconds", "lower"),
    ("run.epoch_s", "epoch time (estimate)", "seconds", "lower"),
    ("run.step_s", "median step time", "seconds", "lower"),
    ("run.data_wait_share", "data-wait share", "share", "lower"),
    ("gpu.util_mean", "GPU util (NVML, mean)", "pct", "higher"),
    ("trace.gpu_busy_share", "GPU busy (trace kernels)", "share", "higher"),
    ("gpu.mem_fraction_peak", "peak GPU memory", "share", None),
    ("gpu.mem_used_max", "peak GPU memory (bytes)", "bytes", None),
    ("cpu.train_thread_pct", "training-thread CPU (% of a core)", "cpu", None),
    ("loader.capacity_images_per_s", "loader alone images/s", "rate", "higher"),
]

# What must match for a like-for-like comparison: label -> how to read it from a Diagnosis
SAME = {
    "device": lambda d: d.profile.settings.get("device") or d.facts.get("run.device"),
    "gpu": lambda d: d.facts.get("gpu.name"),
    "imgsz": lambda d: d.profile.settings.get("imgsz", d.profile.args.get("imgsz")),
    "model": lambda d: d.profile.args.get("model"),
    "data": lambda d: d.profile.args.get("data"),
}


@dataclass
class Comparison:
    a: Diagnosis
    b: Diagnosis
    deltas: dict[str, dict[str, Any]]
    resolved: list[str]
    new: list[str]
    persisting: list[str]
    unmeasured: list[str] = field(default_factory=list)  # in A; silent in B only because B lacks the facts
    mismatch: dict[str, dict[str, Any]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # worth knowing, yet like for like (the host's speed moved)

    @property
    def comparable(self) -> bool:
        return not self.warnings


def run_name(d: Diagnosis) -> str:
    return Path(d.run_dir).resolve().name or str(d.run_dir)


def delta(a: Any, b: Any) -> dict[str, Any]:
    a, b = _num(a), _num(b)
    return {"a": a, "b": b, "ratio": b / a if a is not None and b is not None and a != 0 else None,
            "delta": b - a if a is not None and b is not None else None}


def compare(run_a: str | Path, run_b: str | Path, rules: list[Compiled] | None = None) -> Comparison:
    """Diagnose both runs (an unreadable one is an InputError) and compare them."""
    from yolodoctor.diagnosis.diagnose import diagnose
    from yolodoctor.diagnosis.rules import load_rules

    rules = rules if rules is not None else load_rules(None)
    a, b = diagnose(run_a, rules=rules), diagnose(run_b, rules=rules)
    deltas = {fact: {**delta(a.facts.get(fact), b.facts.get(fact)), "label": label, "better": better}
              for fact, label, _, better in METRICS}
    ids_a = [f.id for f in ranked(a.findings)]
    ids_b = [f.id for f in ranked(b.findings)]
    silent_b = {o.rule: o.state for o in b.outcomes}
    gone = [i for i in ids_a if i not in ids_b]
    cmp = Comparison(a, b, deltas, resolved=[i for i in gone if silent_b.get(i) == "false"],
                     new=[i for i in ids_b if i not in ids_a], persisting=[i for i in ids_b if i in ids_a],
                     unmeasured=[i for i in gone if silent_b.get(i) != "false"])
    for side, d in (("A", a), ("B", b)):
        if d.profile.status != "complete":
            cmp.warnings.append(f"run {side} ({run_name(d)}) is {d.profile.status}"
                                f"{': ' + d.profile.reason if d.profile.reason else ''}")
        if d.facts.get("run.window_valid") is False:
            why = ((d.profile.summary or {}).get("window") or {}).get("why")
            cmp.warnings.append(f"run {side} ({run_name(d)}): the steady window is too short to conclude"
                                f"{' (' + str(why) + ')' if why else ''}")
        elif "run.window_valid" not in d.facts:
            cmp.warnings.append(f"run {side} ({run_name(d)}) has no steady window")
    for key, get in SAME.items():
        va, vb = get(a), get(b)
        if va is not None and vb is not None and str(va) != str(vb):
            cmp.mismatch[key] = {"a": va, "b": vb}
            cmp.warnings.append(f"{key} differs: {va} (A) vs {vb} (B)")
    from yolodoctor.profiling.hostprobe import MOVED, moved

    ha, hb = _num(a.facts.get("host.python_ms")), _num(b.facts.get("host.python_ms"))
    if (moved([ha, hb]) or 0.0) > MOVED:
        cmp.notes.append(f"the host's own speed differed: a fixed Python loop took {ha:.1f} ms around A and {hb:.1f} "
                         "ms around B; a host-bound run's rate moves with it (a shared machine does this)")
    return cmp


def speedups(cmp: Comparison) -> dict[str, dict[str, Any]]:
    """B's speed-up over A, each named as what it is: ``steps`` (steady images/s over the training steps, pauses
    left out; where both windows hold) and ``wall`` (the whole run's wall time, process start to end; where both
    runs were whole). A figure that cannot be had says why instead."""
    out: dict[str, dict[str, Any]] = {}
    r = cmp.deltas.get("run.images_per_s") or {}
    valid = all(d.facts.get("run.window_valid") is True for d in (cmp.a, cmp.b))
    if r.get("ratio") and valid:
        out["steps"] = {"ratio": r["ratio"], "a": r["a"], "b": r["b"],
                        "what": "steady images/s over the training steps (pauses left out)"}
    else:
        out["steps"] = {"ratio": None, "why": "a steady window is missing" if not valid else "no rate to compare"}
    w = cmp.deltas.get("run.wall_s") or {}
    if w.get("a") and w.get("b"):
        out["wall"] = {"ratio": w["a"] / w["b"], "a": w["a"], "b": w["b"],
                       "what": "wall time of the whole run (setup, training, validation, end)"}
    else:
        bounded = [s for s, d in (("A", cmp.a), ("B", cmp.b)) if (d.profile.summary or {}).get("bounded")]
        which = "runs A and B were bounded profiles" if len(bounded) == 2 else f"run {bounded[0]} was a bounded " \
            "profile" if bounded else ""
        out["wall"] = {"ratio": None, "why": (f"{which}, not the whole training" if bounded else
                                              "a run's wall time was not recorded")}
    return out


def changed_args(cmp: Comparison) -> dict[str, tuple[Any, Any]]:
    """The train arguments that differ between A and B (as each run was asked for), by name."""
    a, b = cmp.a.profile.args or {}, cmp.b.profile.args or {}
    return {k: (a.get(k, "-"), b.get(k, "-")) for k in sorted(set(a) | set(b))
            if k not in ("project", "name") and str(a.get(k)) != str(b.get(k))}


def speedup_line(ups: dict[str, dict[str, Any]]) -> str:
    """B's speed-up over A in one line, each figure named as what it is (or why it is missing)."""
    parts = []
    for key, name in (("steps", "on the training steps (steady images/s)"), ("wall", "on the wall time (whole run)")):
        u = ups.get(key) or {}
        parts.append(f"{u['ratio']:.2f}x {name}" if u.get("ratio") else f"none {name}: {u.get('why', 'not measured')}")
    return "speed-up: " + "; ".join(parts)


def fmt(v: float | None, kind: str) -> str:
    if v is None:
        return "n/a"
    if kind == "rate":
        return f"{v:,.1f}"
    if kind == "seconds":  # as diagnose shows them (report.human)
        return f"{v * 1000:.0f} ms" if abs(v) < 1 else f"{v:,.1f} s"
    if kind in ("pct", "cpu"):
        return f"{v:.1f} %"
    if kind == "share":
        return f"{100 * v:.1f} %"
    if kind == "bytes":
        return f"{v / 1e9:.2f} GB"
    return f"{v:.4g}"


def change(d: dict[str, Any], kind: str) -> tuple[str, str | None]:
    """The change as text, and "better" / "worse" / None for colouring."""
    if d["delta"] is None:
        return "", None
    if kind in ("share", "pct"):
        pts = d["delta"] * (100 if kind == "share" else 1)
        text = f"{pts:+.1f} points"
    else:
        text = f"×{d['ratio']:.2f}" if d["ratio"] is not None else f"{d['delta']:+.3g}"
    verdict = None
    if d["better"] and d["delta"] != 0 and (d["ratio"] is None or abs(d["ratio"] - 1) > 0.02):
        verdict = "better" if (d["delta"] > 0) == (d["better"] == "higher") else "worse"
    return text, verdict


def to_json(cmp: Comparison, html: str | None = None) -> dict[str, Any]:
    runs = [{"run_dir": str(d.run_dir), "name": run_name(d), "status": d.profile.status,
             "reason": d.profile.reason, "facts": d.facts,
             "findings": [f.id for f in ranked(d.findings)]} for d in (cmp.a, cmp.b)]
    return report.envelope("compare", cmp.b.findings, cmp.b.facts, None, runs=runs, deltas=cmp.deltas,
                           resolved=cmp.resolved, new=cmp.new, persisting=cmp.persisting, unmeasured=cmp.unmeasured,
                           comparable=cmp.comparable, mismatch=cmp.mismatch, warnings=cmp.warnings, notes=cmp.notes,
                           speedups=speedups(cmp), changed={k: list(v) for k, v in changed_args(cmp).items()},
                           html=html)


def render(console: Console, cmp: Comparison) -> None:
    from rich.markup import escape
    from rich.table import Table

    console.rule(f"[bold]yolodoctor compare: A {escape(run_name(cmp.a))} → B {escape(run_name(cmp.b))}")
    for w in cmp.warnings:
        console.print(f"[yellow]not like for like:[/] {escape(w)}", highlight=False)
    for n in cmp.notes:
        console.print(f"[yellow]note:[/] {escape(n)}", highlight=False)
    t = Table("", "A (before)", "B (after)", "change")
    for fact, label, kind, _ in METRICS:
        d = cmp.deltas[fact]
        if d["a"] is None and d["b"] is None:
            continue
        text, verdict = change(d, kind)
        style = {"better": "green", "worse": "red"}.get(verdict or "", "")
        t.add_row(label, fmt(d["a"], kind), fmt(d["b"], kind), f"[{style}]{text}[/]" if style else text)
    console.print(t)
    if changed := changed_args(cmp):
        console.print("changed: " + escape(", ".join(f"{k} {a} -> {b}" for k, (a, b) in changed.items())),
                      highlight=False)
    console.print(speedup_line(speedups(cmp)), highlight=False)
    by_id = {f.id: f for f in (*cmp.a.findings, *cmp.b.findings)}
    missing = {o.rule: o.detail for o in cmp.b.outcomes if o.state != "fired"}
    unknown_in_a = {o.rule for o in cmp.a.outcomes if o.state in ("missing", "error")}
    for title, ids, style in (("resolved", cmp.resolved, "green"), ("new", cmp.new, "red"),
                              ("persisting", cmp.persisting, "yellow"),
                              ("not measured in B (its facts are missing there)", cmp.unmeasured, "dim")):
        if not ids and style == "dim":
            continue
        console.print(f"[bold {style}]{title}[/] ({len(ids)})")
        for i in ids:
            f, why = by_id[i], missing.get(i)
            note = (": no " + why if why and style == "dim" else
                    ", A could not measure it" if style == "red" and i in unknown_in_a else "")
            console.print(f"  [bold]{i}[/] {escape(f.name)} [dim]({f.severity.name}{escape(note)})[/]",
                          highlight=False)
