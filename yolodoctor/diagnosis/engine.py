"""The rule engine: compiled rules + facts -> findings, ranked by estimated time saved.

A rule (or one of its forms) is silent when one of its facts is missing (or null), when its condition cannot be
evaluated on the facts given, or when it is false. A rule with `each` is evaluated once per item of its list fact and
makes one finding per item it holds for. The rule format (forms, cases, values, each) is described in rules.py.
``LiveEngine`` runs the same rules over a rolling window with hysteresis, for the monitor: a finding appears after
``on`` consecutive true evaluations and clears after ``off`` consecutive false ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from yolodoctor.diagnosis import template
from yolodoctor.diagnosis.facts import CATALOGUE, ITEMS
from yolodoctor.diagnosis.rules import ITEM, Compiled, CompiledEvidence, CompiledForm, FixSpec, Rule, context
from yolodoctor.findings import Finding, Fix, Severity, ranked

if TYPE_CHECKING:
    import cel

PREFIX = ITEM + "."


@dataclass
class Outcome:
    """What one rule did: fired, was false, or stayed silent and why (for `diagnose --explain`)."""

    rule: str
    state: str  # "fired" | "false" | "missing" | "error" | "not-applicable"
    detail: str | None = None  # missing: the facts the run lacks; false: the condition and the values it read
    condition: str | None = None  # false: the condition that did not hold, on one line
    values: dict[str, Any] | None = None  # false: the facts it read, by name (for a report in units)

    @property
    def words(self) -> str:
        """The outcome as a sentence (`diagnose --explain`)."""
        if self.state == "missing":
            return f"not judged: this run has no {self.detail}" if self.detail else "not judged"
        if self.state == "false":
            return f"silent: {self.detail}" if self.detail else "silent: its condition does not hold"
        if self.state == "error":
            return f"could not be judged: {self.detail}"
        if self.state == "not-applicable":
            return f"does not apply: {self.detail}"
        return "fired"


def _value(v: Any) -> Any:
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return int(v)
    return v


def _eval(prog: cel.Program, ctx: cel.Context) -> Any:
    return prog.execute(ctx)


def _kind(name: str, each: str | None) -> str:
    return ITEMS[each][name[len(PREFIX):]][0] if each and name.startswith(PREFIX) else CATALOGUE[name][0]


def _cel(kind: str, v: Any) -> Any:
    """A fact as CEL reads it: a count recorded as an integer is still a double (CEL does not mix the two)."""
    return float(v) if kind == "double" and isinstance(v, int) and not isinstance(v, bool) else v


def _lookup(name: str, facts: dict[str, Any], item: dict[str, Any] | None) -> Any:
    if name.startswith(PREFIX):
        return item.get(name[len(PREFIX):]) if item is not None else None
    return facts.get(name)


class _Env:
    """One evaluation: the raw values (for the message and evidence) and the CEL context (for the expressions)."""

    def __init__(self, each: str | None, local: dict[str, Any], values: dict[str, Any] | None = None) -> None:
        self.each, self.local, self.values = each, local, dict(values or {})
        self.ctx = self._context()

    def _context(self) -> cel.Context:
        flat = {n: _cel(_kind(n, self.each), v) for n, v in self.local.items()
                if not n.startswith(PREFIX) and n not in self.values}
        ctx = context(flat)
        item = {n[len(PREFIX):]: _cel(_kind(n, self.each), v) for n, v in self.local.items() if n.startswith(PREFIX)}
        if item:
            ctx.update({ITEM: item})
        if self.values:
            ctx.update(self.values)
        return ctx

    def extend(self, names: list[str], facts: dict[str, Any], item: dict[str, Any] | None) -> _Env:
        """The same evaluation, reading more facts (a case's own)."""
        return _Env(self.each, {**self.local, **{n: _lookup(n, facts, item) for n in names}}, self.values)

    def set_value(self, name: str, prog: cel.Program) -> None:
        try:
            v = _eval(prog, self.ctx)
        except Exception:  # a value that cannot be computed here (a division by zero, an index out of range) is null
            v = None
        self.values[name] = v
        self.local[name] = v
        self.ctx.update({name: v})


def _evidence(ev: CompiledEvidence, env: _Env) -> dict[str, Any]:
    def term(t: tuple[str, Any]) -> Any:
        kind, x = t
        if kind == "raw":
            return env.local.get(x)
        if kind == "const":
            return x
        try:
            return _eval(x, env.ctx)
        except Exception:
            return None

    if ev.kind == "list":  # facts by name: a whole number recorded as a float is shown as an integer
        return {n: _value(env.local.get(n)) for n in ev.names}
    if ev.kind == "map":  # named terms: each shown as recorded, or as its expression gives it
        return {k: term(t) for k, t in ev.terms.items()}
    spread = term(ev.spread) if ev.spread is not None else None
    return dict(spread) if isinstance(spread, dict) else {"value": spread}


def _fix(spec: FixSpec | None, exprs: dict[str, Any], env: _Env) -> Fix | None:
    if not spec:
        return None
    computed: dict[str, Any] = {}
    for key, prog in exprs.items():
        try:
            computed[key] = _value(_eval(prog, env.ctx))
        except Exception:
            computed[key] = None

    def pick(section: str, raw: dict[str, Any]) -> dict[str, Any]:
        return {k: computed.get(f"{section}.{k}") if isinstance(v, str) else v for k, v in raw.items()}

    def number(key: str, raw: Any) -> float | None:
        v = computed.get(key) if isinstance(raw, str) else raw
        return round(float(v), 2) if isinstance(v, (int, float)) and math.isfinite(v) else None

    return Fix(args=pick("args", spec.args), env={k: str(v) for k, v in pick("env", spec.env).items()},
               torch_flags=pick("torch_flags", spec.torch_flags), safety=spec.safety,
               changes_training=spec.changes_training,
               seconds_saved_per_epoch=number("seconds_saved_per_epoch", spec.seconds_saved_per_epoch),
               one_off_seconds=number("one_off_seconds", spec.one_off_seconds), note=spec.note)


def _one(rule: Rule, cf: CompiledForm, facts: dict[str, Any], item: dict[str, Any] | None
         ) -> tuple[Finding | None, Outcome]:
    form = cf.form
    if item is not None:
        lacking = [n for n in form.facts if n.startswith(PREFIX) and item.get(n[len(PREFIX):]) is None]
        if lacking:
            return None, Outcome(rule.id, "missing", ", ".join(lacking))
    try:
        env = _Env(form.each, {n: _lookup(n, facts, item) for n in form.facts + form.optional})
        for name, prog in cf.values:
            env.set_value(name, prog)
        hit = _eval(cf.condition, env.ctx)
    except Exception as e:
        return None, Outcome(rule.id, "error", str(e).split(". ")[0])
    if hit is not True:
        return None, Outcome(rule.id, "false", _why_false(form.condition, form.facts, facts, item),
                             " ".join(form.condition.split()),
                             {n: v for n in form.facts if (v := _lookup(n, facts, item)) is not None})
    severity, message, evidence = cf.severity, form.message, cf.evidence
    fix_spec, fix_exprs = form.fix, cf.fix_exprs
    for cc in cf.cases:
        case = cc.case
        if any(_lookup(n, facts, item) is None for n in case.facts):
            continue
        try:
            cenv = env.extend(case.facts + case.optional, facts, item) if case.facts or case.optional else env
            if _eval(cc.when, cenv.ctx) is not True:
                continue
        except Exception:
            continue
        env = cenv
        severity = case.severity or severity
        message = case.message if case.message is not None else message
        evidence = cc.evidence or evidence
        if "fix" in case.model_fields_set:
            fix_spec, fix_exprs = case.fix, cc.fix_exprs
        break
    text = template.render(message, env.local, set(env.local)).strip()
    finding = Finding(rule.id, rule.name, rule.category, Severity[severity], text,
                      evidence=_evidence(evidence, env), fix=_fix(fix_spec, fix_exprs, env))
    return finding, Outcome(rule.id, "fired")


def _shown(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _why_false(condition: str, names: list[str], facts: dict[str, Any], item: dict[str, Any] | None) -> str:
    """The condition that did not hold, in its own words, with the values it read."""
    values = ", ".join(f"{n} = {_shown(v)}" for n in names if (v := _lookup(n, facts, item)) is not None)
    return f"`{' '.join(condition.split())}` does not hold" + (f" with {values}" if values else "")


def _form(rule: Rule, cf: CompiledForm, facts: dict[str, Any]) -> tuple[list[Finding], Outcome]:
    form = cf.form
    missing = [f for f in form.facts if not f.startswith(PREFIX) and facts.get(f) is None]
    if form.each and facts.get(form.each) is None:
        missing.append(form.each)
    if missing:
        return [], Outcome(rule.id, "missing", ", ".join(missing))
    if not form.each:
        f, o = _one(rule, cf, facts, None)
        return ([f] if f else []), o
    items = facts[form.each]
    if not isinstance(items, list):
        return [], Outcome(rule.id, "error", f"{form.each} is not a list")
    found, outcome = [], Outcome(rule.id, "false", f"no item of {form.each}" if not items else None)
    for item in items:
        if not isinstance(item, dict):
            continue
        f, o = _one(rule, cf, facts, item)
        if f:
            found.append(f)
        elif o.state == "error":
            outcome = o
    return found, (Outcome(rule.id, "fired") if found else outcome)


def evaluate_rule(c: Compiled, facts: dict[str, Any]) -> tuple[list[Finding], Outcome]:
    """The rule's findings (one, or one per item with `each`): its own form first, then its other forms. A rule for
    other tasks than the training's (``tasks``) stays silent."""
    task = facts.get("settings.task") or facts.get("dataset.task")
    if c.rule.tasks and isinstance(task, str) and task not in c.rule.tasks:
        return [], Outcome(c.rule.id, "not-applicable", f"a {task} training; it applies to "
                                                         f"{', '.join(c.rule.tasks)} trainings")
    first: Outcome | None = None
    for cf in c.forms:
        found, o = _form(c.rule, cf, facts)
        if found:
            return found, o
        if first is None or (first.state == "missing" and o.state != "missing"):
            first = o
    return [], first or Outcome(c.rule.id, "missing")


def evaluate(rules: list[Compiled] | tuple[Compiled, ...],
             facts: dict[str, Any]) -> tuple[list[Finding], list[Outcome]]:
    findings, outcomes = [], []
    for c in rules:
        found, o = evaluate_rule(c, facts)
        outcomes.append(o)
        findings.extend(found)
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
            found, _ = evaluate_rule(c, facts)
            f = found[0] if found else None
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
