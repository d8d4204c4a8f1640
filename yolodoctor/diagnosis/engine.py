"""The rule engine: compiled rules + facts -> findings, ranked by estimated time saved.

A rule is silent when one of its facts is missing (or null), when its condition cannot be evaluated on the facts
given, or when it is false. ``LiveEngine`` runs the same rules over a rolling window with hysteresis, for the
monitor: a finding appears after ``on`` consecutive true evaluations and clears after ``off`` consecutive false ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from yolodoctor.diagnosis import template
from yolodoctor.diagnosis.rules import Compiled, context
from yolodoctor.findings import Finding, Fix, Severity
from yolodoctor.report import ranked


@dataclass
class Outcome:
    """What one rule did: fired, was false, or stayed silent and why (for `diagnose --explain`)."""

    rule: str
    state: str  # "fired" | "false" | "missing" | "error"
    detail: str | None = None


def _value(v: Any) -> Any:
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return int(v)
    return v


def _eval(prog, ctx: dict[str, Any]) -> Any:
    return prog.execute(ctx)


def evaluate_rule(c: Compiled, facts: dict[str, Any]) -> tuple[Finding | None, Outcome]:
    rule = c.rule
    missing = [f for f in rule.facts if facts.get(f) is None]
    if missing:
        return None, Outcome(rule.id, "missing", ", ".join(missing))
    ctx = context({f: facts[f] for f in rule.facts})
    try:
        hit = _eval(c.condition, ctx)
    except Exception as e:
        return None, Outcome(rule.id, "error", str(e).split(". ")[0])
    if hit is not True:
        return None, Outcome(rule.id, "false")
    local = {f: facts[f] for f in rule.facts}
    fix = None
    if rule.fix:
        computed: dict[str, Any] = {}
        for key, prog in c.fix_exprs.items():
            try:
                computed[key] = _value(_eval(prog, ctx))
            except Exception:
                computed[key] = None
        spec = rule.fix

        def pick(section: str, raw: dict[str, Any]) -> dict[str, Any]:
            return {k: computed.get(f"{section}.{k}") if isinstance(v, str) else v for k, v in raw.items()}

        def number(key: str, raw) -> float | None:
            v = computed.get(key) if isinstance(raw, str) else raw
            return round(float(v), 2) if isinstance(v, (int, float)) and math.isfinite(v) else None

        fix = Fix(args=pick("args", spec.args), env={k: str(v) for k, v in pick("env", spec.env).items()},
                  torch_flags=pick("torch_flags", spec.torch_flags), safety=spec.safety,
                  changes_training=spec.changes_training,
                  seconds_saved_per_epoch=number("seconds_saved_per_epoch", spec.seconds_saved_per_epoch),
                  one_off_seconds=number("one_off_seconds", spec.one_off_seconds), note=spec.note)
    finding = Finding(rule.id, rule.name, rule.category, Severity[rule.severity],
                      template.render(rule.message, local, set(rule.facts)).strip(),
                      evidence={f: _value(facts[f]) for f in rule.shown}, fix=fix)
    return finding, Outcome(rule.id, "fired")


def evaluate(rules: list[Compiled], facts: dict[str, Any]) -> tuple[list[Finding], list[Outcome]]:
    findings, outcomes = [], []
    for c in rules:
        f, o = evaluate_rule(c, facts)
        outcomes.append(o)
        if f:
            findings.append(f)
    return ranked(findings), outcomes


@dataclass
class LiveEngine:
    rules: list[Compiled]
    on: int = 3
    off: int = 5
    active: dict[str, Finding] = field(default_factory=dict)
    _true: dict[str, int] = field(default_factory=dict)
    _false: dict[str, int] = field(default_factory=dict)

    def update(self, facts: dict[str, Any]) -> tuple[list[Finding], list[str]]:
        """Evaluate once; returns (findings that appeared, ids that cleared)."""
        appeared, cleared = [], []
        for c in self.rules:
            f, _ = evaluate_rule(c, facts)
            rid = c.rule.id
            if f:
                self._true[rid] = self._true.get(rid, 0) + 1
                self._false[rid] = 0
                if rid in self.active:
                    self.active[rid] = f  # keep the evidence fresh
                elif self._true[rid] >= self.on:
                    self.active[rid] = f
                    appeared.append(f)
            else:
                self._false[rid] = self._false.get(rid, 0) + 1
                self._true[rid] = 0
                if rid in self.active and self._false[rid] >= self.off:
                    del self.active[rid]
                    cleared.append(rid)
        return appeared, cleared
