"""Reports: the JSON envelope on stdout, and a rich rendering grouped by category."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from yolodoctor.findings import CATEGORIES, Finding, Severity, ranked
from yolodoctor.version import SCHEMA

SEVERITY_STYLE = {Severity.error: "bold red", Severity.warning: "yellow", Severity.info: "cyan"}


def _jsonable(v: Any) -> Any:
    if isinstance(v, Path):
        return str(v)
    if isinstance(v, (set, frozenset, tuple)):
        return list(v)
    return str(v)


def envelope(command: str, findings: list[Finding], facts: dict[str, Any], run_dir: str | None = None,
             **extra: Any) -> dict[str, Any]:
    return {"schema": SCHEMA, "command": command, "findings": [f.to_dict() for f in ranked(findings)],
            "facts": facts, "run_dir": run_dir, **extra}


def dump_json(obj: dict[str, Any], stream=None) -> None:
    """Strict JSON: a non-finite number (say, a NaN in a profile recorded elsewhere) is written as null."""
    stream = stream or sys.stdout
    try:
        text = json.dumps(obj, default=_jsonable, indent=2, allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(obj), default=_jsonable, indent=2, allow_nan=False)
    stream.write(text + "\n")
    stream.flush()


def _finite(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite(x) for x in v]
    return v


def _short(v: Any) -> Any:
    if isinstance(v, float):
        return f"{v:.4g}"
    return v


def render_findings(console, findings: list[Finding], title: str, group: bool = True) -> None:
    """Findings as panels: grouped by category (check), or in rank order, most time saved first (diagnose)."""
    from rich.panel import Panel
    from rich.text import Text

    console.rule(f"[bold]{title}")
    if not findings:
        console.print("[green]No findings.[/]")
        return
    by_cat: dict[str, list[Finding]] = {}
    for f in ranked(findings):
        by_cat.setdefault(f.category if group else "", []).append(f)
    for cat in (CATEGORIES if group else ("",)):
        if cat not in by_cat:
            continue
        if cat:
            console.print(Text(cat.upper(), style="bold"))
        for f in by_cat[cat]:
            style = SEVERITY_STYLE[f.severity]
            head = Text.assemble((f"{f.severity.name:<8}", style), (f"{f.id} ", "bold"), (f"{f.name}", "dim"),
                                 ("" if group else f"  [{f.category}]", "dim"))
            body = Text(f.message)
            ev = _evidence_lines(f.evidence)
            if ev:
                body.append("\n" + ev, style="dim")
            if f.fix:
                body.append("\nfix: ", style="bold green")
                body.append(_fix_text(f.fix))
            console.print(Panel(body, title=head, title_align="left", border_style=style, expand=True))
    counts = {s: sum(1 for f in findings if f.severity == s) for s in Severity}
    console.print(f"[bold red]{counts[Severity.error]} error(s)[/], [yellow]{counts[Severity.warning]} warning(s)[/],"
                  f" [cyan]{counts[Severity.info]} info[/]")


def _fix_text(fix) -> str:
    parts = [f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in fix.args.items()]
    parts += [f"{k}={v}" for k, v in fix.env.items()]
    parts += [f"torch.backends.{k} = {v}" for k, v in fix.torch_flags.items()]
    text = " ".join(parts)
    if fix.note:
        text = f"{text}  ({fix.note})" if text else fix.note
    if fix.safety == "unsafe":
        text += "  [unsafe: changes training]" if fix.changes_training else "  [unsafe]"
    if fix.seconds_saved_per_epoch:
        text += f"  (saves up to ~{fix.seconds_saved_per_epoch:.1f} s/epoch"
        text += f", one-off {fix.one_off_seconds:.0f} s)" if fix.one_off_seconds else ")"
    elif fix.one_off_seconds:
        text += f"  (one-off {fix.one_off_seconds:.0f} s)"
    return text


def _evidence_lines(ev: dict[str, Any], limit: int = 6) -> str:
    lines = []
    for k, v in ev.items():
        if isinstance(v, list) and v and isinstance(v[0], dict):
            lines.append(f"{k}:")
            for item in v[:limit]:
                lines.append("  - " + ", ".join(f"{ik}={iv}" for ik, iv in item.items()))
            if len(v) > limit:
                lines.append(f"  ... {len(v) - limit} more")
        else:
            text = json.dumps(_short(v), default=_jsonable) if not isinstance(v, str) else v
            text = text.strip('"') if isinstance(_short(v), str) and not isinstance(v, str) else text
            lines.append(f"{k}: {text if len(text) < 160 else text[:157] + '...'}")
    return "\n".join(lines)


def render_facts(console, facts: dict[str, Any], keys: list[tuple[str, str]]) -> None:
    from rich.table import Table

    table = Table(show_header=False, box=None, pad_edge=False)
    for label, key in keys:
        if facts.get(key) is not None:
            v = facts[key]
            table.add_row(f"[dim]{label}[/]", ", ".join(map(str, v)) if isinstance(v, list) else str(_short(v)))
    console.print(table)
