"""`yolodoctor diagnose RUN_DIR` and `yolodoctor rules [ID]`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from yolodoctor.errors import UsageError
from yolodoctor.findings import Severity, exit_code
from yolodoctor.presentation import report

if TYPE_CHECKING:
    from rich.console import Console

    from yolodoctor.diagnosis.rules import Form

# (label, fact): shown in human units (report.human)
FACT_KEYS = [
    ("complete", "run.complete"), ("device", "run.device"), ("steady rate", "run.images_per_s"),
    ("window valid", "run.window_valid"), ("data wait", "run.data_wait_share"), ("median step", "run.step_s"),
    ("batch", "run.batch"), ("workers", "settings.workers"), ("precision", "settings.precision"),
    ("loader alone", "loader.capacity_images_per_s"), ("GPU util (NVML)", "gpu.util_mean"),
    ("GPU busy (trace)", "trace.gpu_busy_share"), ("kernels/step", "trace.kernels_per_step"),
    ("training thread CPU", "cpu.train_thread_pct"), ("peak GPU memory", "gpu.mem_fraction_peak"),
]


def run_diagnose(run_dir: Path, *, rule_dirs: list[str | Path] | None, as_json: bool, fail_on: Severity,
                 explain: bool = False) -> int:
    from yolodoctor.console import stdout_console
    from yolodoctor.diagnosis.diagnose import diagnose
    from yolodoctor.presentation.verdict import verdict

    d = diagnose(run_dir, rule_dirs)
    findings = d.reported  # how the run ended, as profile said it (a crash, an OOM), then the diagnosis
    v = verdict(d.facts, findings, d.run_dir, d.profile)
    if as_json:
        report.dump_json(report.envelope("diagnose", findings, d.facts, run_dir=str(d.run_dir),
                                         status=d.profile.status, reason=d.profile.reason, verdict=v.to_dict(),
                                         silent=[o.__dict__ for o in d.outcomes if o.state != "fired"]
                                         if explain else None))
    else:
        from rich.markup import escape

        out = stdout_console()
        out.rule(f"[bold]yolodoctor diagnose: {d.run_dir}")
        report.render_verdict(out, v)
        keys = [("rate (not steady)", k) if k == "run.images_per_s" and d.facts.get("run.window_valid") is False
                else (label, k) for label, k in FACT_KEYS]
        shown = dict(d.facts)
        if wall := report.wall_line(d.profile.summary or {}):
            shown["run.wall"] = wall
            keys.append(("wall time", "run.wall"))
        for r in d.profile.ranks or []:  # DDP: the ranks side by side
            shown[f"ranks.{r.get('rank')}"] = report.rank_line(r)
            keys.append((f"rank {r.get('rank')}", f"ranks.{r.get('rank')}"))
        report.render_facts(out, shown, keys, report.setting_notes(
            d.facts, d.profile.args if d.profile.mode == "args" else None))
        if d.profile.status != "complete":
            out.print(f"[yellow]profile incomplete:[/] {escape(str(d.profile.reason))}")
        report.render_findings(out, findings, "Diagnosis (most time saved first)", group=False)
        if v.next:
            out.print(f"next: [cyan]{escape(v.next)}[/]")
        if explain:
            _explain(out, d.outcomes)
    return exit_code(findings, fail_on)


def _explain(out: Console, outcomes: list[Any]) -> None:
    """What the rules that did not fire made of this run: first those judged (their condition, the values it read in
    units), then those that could not be judged, then those not judged, grouped by the kind of fact the run lacks."""
    from rich.markup import escape

    judged = [o for o in outcomes if o.state == "false"]
    if judged:
        out.rule("[bold]Judged, silent (the condition does not hold here)")
        for o in judged:
            vals = ", ".join(f"{k} {report.human(k, v)}" for k, v in (o.values or {}).items())
            cond = escape(o.condition or o.detail or "")
            out.print(f"{o.rule}: [dim]{cond}[/]" + (f" - {escape(vals)}" if vals else ""), highlight=False)
    for o in (o for o in outcomes if o.state == "error"):
        out.print(f"[yellow]{o.rule}: {escape(o.words)}[/]", highlight=False)
    other = [o for o in outcomes if o.state == "not-applicable"]
    if other:
        out.rule("[bold]Not for this training's task")
        for o in other:
            out.print(f"{o.rule}: [dim]{escape(o.detail or '')}[/]", highlight=False)
    groups: dict[str, list[str]] = {}
    for o in (o for o in outcomes if o.state == "missing"):
        lacked = sorted({f.strip().split(".")[0] for f in (o.detail or "").split(",") if f.strip()})
        groups.setdefault(", ".join(f"{k}.*" for k in lacked) or "facts", []).append(o.rule)
    if groups:
        out.rule("[bold]Not judged (this run lacks the facts they read)")
        for kinds, rules in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            out.print(f"[dim]{escape(kinds)}:[/] {' '.join(rules)}", highlight=False)


ID_SCHEME = ("A rule's id: its letters name the area (BD the step's bound, CF settings, DD distributed, "
             "DL data loader, "
             "DS dataset, EN environment, IO storage and decode, LA kernel launches, MM memory, PR precision, "
             "RN the measurement, ST stability, SY synchronisation, VL validation); its hundreds say when it can "
             "fire: 0xx reading the data.yaml, 1xx before training (check; some also from a training's record), "
             "2xx only from a training (profile, diagnose, the monitor). Severity info, warning or error; a fix "
             "marked unsafe changes what is optimised, and fix --verify trials its loss.")


def run_rules(rule_id: str | None, *, rule_dirs: list[str | Path] | None, as_json: bool,
              facts: bool = False) -> int:
    from yolodoctor.console import stdout_console
    from yolodoctor.diagnosis.facts import CATALOGUE, ITEMS
    from yolodoctor.diagnosis.rules import load_rules, shipped_rules

    rules = [c.rule for c in (load_rules(rule_dirs, bound=True) if rule_dirs else shipped_rules())]
    if rule_id:
        rules = [r for r in rules if r.id == rule_id.upper() or r.name == rule_id]
        if not rules:
            raise UsageError(f"no rule {rule_id!r} (yolodoctor rules lists them)")
    dump = [r.model_dump(exclude={"source"}) | {"file": r.source.split("/")[-1]} for r in rules]
    if as_json:
        extra: dict[str, Any] = {"catalogue": {k: {"type": t, "meaning": m} | (
            {"items": {f: {"type": ft, "meaning": fm} for f, (ft, fm) in ITEMS[k].items()}} if k in ITEMS else {})
            for k, (t, m) in CATALOGUE.items()}} if facts else {}
        report.dump_json(report.envelope("rules", [], {}, rules=dump, **extra))
        return 0
    out = stdout_console()
    if facts:
        from rich.table import Table

        t = Table("fact", "type", "meaning", title="Facts rules can use")
        for k, (typ, meaning) in CATALOGUE.items():
            t.add_row(k, typ, meaning)
            for f, (ft, fm) in ITEMS.get(k, {}).items():  # what a rule with `each: k` reads as item.<field>
                t.add_row(f"  item.{f}", ft, fm)
        out.print(t)
        return 0
    if rule_id:
        r = rules[0]
        out.rule(f"[bold]{r.id} {r.name}[/] ({r.category}, {'/'.join(r.severities)})")
        out.print(f"[bold]What it detects[/]\n{r.docs.what.strip()}\n\n"
                  f"[bold]Why it matters[/]\n{r.docs.why.strip()}\n\n"
                  f"[bold]How to fix[/]\n{r.docs.fix.strip()}\n")
        for i, form in enumerate(r.all_forms):
            if i:
                out.print(f"\n[bold]or, from other facts[/] ({form.severity or r.severity})")
            _print_form(out, form)
        out.print(f"[dim]file:[/] {r.source}")
        return 0
    from rich.markup import escape
    from rich.table import Table

    t = Table("id", "name", "category", "severity", "fix", title=f"{len(rules)} rules")
    for r in rules:
        fixes = [f.fix for f in r.all_forms] + [c.fix for f in r.all_forms for c in f.cases]
        keys = list(dict.fromkeys(k for x in fixes if x for k in (*x.args, *x.env, *x.torch_flags)))
        fx = ", ".join(keys) or ("note" if any(x and x.note for x in fixes) else "")
        unsafe = any(x and x.safety == "unsafe" for x in fixes)
        t.add_row(r.id, r.name, r.category, "/".join(r.severities), fx + (" (unsafe)" if unsafe else ""))
    out.print(t)
    out.print(f"[dim]{escape(ID_SCHEME)}[/]")
    return 0


def _print_form(out: Console, form: Form) -> None:
    """A form's condition and what it reads (`yolodoctor rules ID`)."""
    from rich.markup import escape

    if form.each:
        out.print(f"[dim]for each item of:[/] {form.each}")
    out.print(f"[dim]condition:[/] {escape(form.condition.strip())}\n[dim]facts:[/] {', '.join(form.facts)}")
    if form.optional:
        out.print(f"[dim]optional facts:[/] {', '.join(form.optional)}")
    for name, expr in form.values.items():
        out.print(f"[dim]value {name}:[/] {escape(str(expr).strip())}")
    for case in form.cases:
        changes = [f"severity {case.severity}"] if case.severity else []
        changes += ["message"] if case.message is not None else []
        changes += ["fix"] if "fix" in case.model_fields_set else []
        out.print(f"[dim]case:[/] {escape(case.when.strip())} -> {', '.join(changes) or 'evidence'}")
