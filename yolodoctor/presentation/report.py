"""Reports: the JSON envelope on stdout, and a rich rendering grouped by category."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from yolodoctor.findings import CATEGORIES, Finding, Fix, Severity, ranked
from yolodoctor.numbers import finite as _finite
from yolodoctor.version import SCHEMA

if TYPE_CHECKING:
    from rich.console import Console

    from yolodoctor.presentation.verdict import Verdict

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


def dump_json(obj: dict[str, Any], stream: IO[str] | None = None) -> None:
    """Strict JSON: a non-finite number (say, a NaN in a profile recorded elsewhere) is written as null."""
    stream = stream or sys.stdout
    try:
        text = json.dumps(obj, default=_jsonable, indent=2, allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(obj), default=_jsonable, indent=2, allow_nan=False)
    stream.write(text + "\n")
    stream.flush()


# facts in bytes (the catalogue's "bytes" and "RAM"/"memory" figures), shown in GB
BYTES = {"gpu.mem_total", "gpu.mem_used_max", "gpu.torch_reserved_max", "gpu.torch_allocated_max", "gpu.mem_per_image",
         "mem.available_min", "mem.shm_free_min", "ram.available", "shm.free", "cache.ram_bytes", "cache.ram_required",
         "loader.prefetch_bytes", "mem_total", "mem_used_max", "mem_per_image"}


def human(key: str, v: Any) -> str:
    """A fact's value as a person reads it, by what its name says it is: shares in percent, times in ms or s, bytes
    in GB or MB, rates with their unit; other numbers to 4 significant digits, flags as yes/no."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if not isinstance(v, (int, float)) or not math.isfinite(v):
        return ", ".join(map(str, v)) if isinstance(v, list) else str(v)
    name = key.rsplit(".", 1)[-1]
    if name.endswith(("_share", "_fraction", "_fraction_peak")) or name in ("share", "val_share"):
        p = 100 * v
        return (f"{p:.1f}%" if 0 < abs(p) < 10 else f"{p:.0f}%") + (" of the card" if key.startswith("gpu.mem") else "")
    if name.endswith(("_pct", "util_mean")) or name == "pct":
        of = " of a core" if key.startswith("cpu.") and name not in ("total_pct", "iowait_pct") else ""
        return (f"{v:.0f}%" if abs(v) >= 10 else f"{v:.1f}%") + of
    if key in BYTES or name in BYTES or name.endswith("_bytes"):  # GB as Ultralytics and nvidia-smi count them
        return f"{v / (1 << 30):.1f} GB" if abs(v) >= 1 << 30 else f"{v / (1 << 20):.0f} MB"
    if name.endswith("_gb"):
        return f"{v:.1f} GB"
    if name.endswith(("_ms", "_ms_median", "_ms_per_step")) or name in ("ms", "decode_ms"):
        return f"{v:.1f} ms" if abs(v) < 100 else f"{v:.0f} ms"
    if name.endswith(("images_per_s", "images_per_s_median")):
        return f"{v:.1f} images/s"
    if name.endswith("_mb_s"):
        return f"{v:.0f} MB/s"
    if name.endswith(("_s", "_s_median", "seconds")) or name == "s":
        return f"{v * 1000:.0f} ms" if abs(v) < 1 else f"{v:.1f} s"
    if name == "headroom":
        return f"{v:.2f}x"
    if isinstance(v, float):
        return f"{v:.0f}" if v.is_integer() else f"{v:.4g}"
    return str(v)


def render_findings(console: Console, findings: list[Finding], title: str, group: bool = True) -> None:
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
                # a fix with nothing to change (only a note) is not printed as one
                changes = bool(f.fix.args or f.fix.env or f.fix.torch_flags)
                body.append("\nfix: " if changes else "\nnote: ", style="bold green" if changes else "bold")
                body.append(_fix_text(f.fix))
            console.print(Panel(body, title=head, title_align="left", border_style=style, expand=True))
    counts = {s: sum(1 for f in findings if f.severity == s) for s in Severity}
    console.print(f"[bold red]{counts[Severity.error]} error(s)[/], [yellow]{counts[Severity.warning]} warning(s)[/],"
                  f" [cyan]{counts[Severity.info]} info[/]")


def _fix_text(fix: Fix) -> str:
    parts = [f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in fix.args.items()]
    parts += [f"{k}={v}" for k, v in fix.env.items()]
    parts += [f"torch.backends.{k} = {v}" for k, v in fix.torch_flags.items()]
    text = " ".join(parts)
    if fix.note:
        text = f"{text}  ({fix.note})" if text else fix.note
    if fix.safety == "unsafe":
        text += "  [unsafe: changes training]" if fix.changes_training else "  [unsafe: needs a trial]"
    if fix.seconds_saved_per_epoch:
        text += f"  (saves up to ~{fix.seconds_saved_per_epoch:.1f} s per epoch"
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
            if isinstance(v, str):
                text = v
            elif isinstance(v, (bool, int, float)):
                text = human(k, v)
            else:
                text = json.dumps(v, default=_jsonable)
            lines.append(f"{k}: {text if len(text) < 160 else text[:157] + '...'}")
    return "\n".join(lines)


def render_facts(console: Console, facts: dict[str, Any], keys: list[tuple[str, str]],
                 notes: dict[str, str] | None = None) -> None:
    """A table of facts, each in human units (``human``), with a note beside those in ``notes`` (by key)."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(show_header=False, box=None, pad_edge=False)
    for label, key in keys:
        if facts.get(key) is not None:
            note = (notes or {}).get(key)
            table.add_row(f"[dim]{escape(label)}[/]", escape(human(key, facts[key]))
                          + (f"  [yellow]{escape(note)}[/]" if note else ""))
    console.print(table)


def render_verdict(console: Console, v: Verdict) -> None:
    """The headline (presentation/verdict.py): the bound, its share and evidence, and what to run next."""
    from rich.markup import escape
    from rich.panel import Panel

    style = "green" if v.healthy else "red" if v.bound == "failed" else "yellow" if v.bound != "unknown" else "dim"
    lines = [f"[bold]{escape(v.headline)}[/]"]
    if v.evidence:
        lines.append("[dim]" + escape("; ".join(v.evidence)) + "[/]")
    if v.caveat:
        lines.append(f"[yellow]{escape(v.caveat[:1].upper() + v.caveat[1:])}.[/]")
    if v.healthy and v.next_why:
        lines.append(f"[green]{escape(v.next_why[:1].upper() + v.next_why[1:])}.[/]")
    elif v.next:
        lines.append(f"[bold]next:[/] [cyan]{escape(v.next)}[/]" + (f"  [dim]({escape(v.next_why)})[/]"
                                                                     if v.next_why else ""))
    elif v.next_why:
        lines.append(f"[dim]{escape(v.next_why)}[/]")
    console.print(Panel("\n".join(lines), title=f"[bold]Verdict: {escape(v.title)}", title_align="left",
                        border_style=style, expand=True))


def setting_notes(facts: dict[str, Any], given: dict[str, Any] | None = None) -> dict[str, str]:
    """For each setting Ultralytics ran otherwise than asked, who changed it and why, by the key the profile's table
    shows it under (``settings.*``). ``given``: the train arguments the user gave (a value not among them is
    Ultralytics' default); None where they are not known (a script's)."""
    out: dict[str, str] = {}

    def asked(key: str, value: Any) -> str:
        who = "" if given is None else " (asked)" if key in given else " (its default)"  # a script's: not known
        return f"changed by Ultralytics from {key}={value}{who}"

    w_asked, w_ran = facts.get("settings.workers_asked"), facts.get("settings.workers")
    if isinstance(w_asked, (int, float)) and isinstance(w_ran, (int, float)) and w_ran < w_asked:
        why = facts.get("settings.workers_why") or "Ultralytics' cap"
        out["settings.workers"] = f"{asked('workers', int(w_asked))}: {why}"
    b_asked, b_ran = facts.get("settings.batch_requested"), facts.get("run.batch")
    if isinstance(b_asked, (int, float)) and isinstance(b_ran, (int, float)) and b_ran != b_asked:
        b_text = f"{b_asked:g}"
        if facts.get("run.oom_retries"):
            out["run.batch"] = (f"{asked('batch', b_text)}: it halved the batch after running out of memory")
        elif b_asked <= 0 or b_asked < 1:
            out["run.batch"] = f"{asked('batch', b_text)}: AutoBatch chose it"
    amp, precision = facts.get("settings.amp_requested"), facts.get("settings.precision")
    if amp in ("true", "fp16", "bf16") and precision == "fp32":
        why = "AMP does nothing on the CPU" if str(facts.get("run.device", "")).startswith("cpu") else (
            "its AMP check failed" if facts.get("ul.amp_check") == "failed" else None)
        out["settings.precision"] = asked("amp", {"true": "True"}.get(amp, amp)) + (f": {why}" if why else "")
    if facts.get("settings.cache_requested") == "ram" and facts.get("ul.cache_refused"):
        gb = facts.get("ul.cache_required_gb"), facts.get("ul.cache_available_gb")
        out["settings.cache"] = (asked("cache", "ram") + ": its RAM guard trained uncached" + (
            f" (it wanted {gb[0]:.1f} GB, {gb[1]:.1f} GB available)" if all(isinstance(x, float) for x in gb) else ""))
    return out


def rank_line(r: dict[str, Any]) -> str:
    """One rank in a line: where its step goes, its loader and its GPU."""
    def ms(key: str) -> str:
        v = r.get(key)
        return f"{1000 * v:.1f} ms" if isinstance(v, (int, float)) else "n/a"

    parts = [f"step {ms('step_s_median')}", f"data wait {ms('wait_s_median')}", f"compute {ms('compute_s_median')}"]
    if isinstance(r.get("workers"), (int, float)):
        parts.append(f"{r['workers']:.0f} worker(s)")
    if isinstance(r.get("gpu_util_pct"), (int, float)):
        parts.append(f"GPU {r['gpu_util_pct']:.0f}% busy")
    return ", ".join(parts)


def wall_line(summary: dict[str, Any]) -> str | None:
    """Where a run's wall time went, in a line: setup (process start to the first step), the training steps, the
    pauses between them (validation, the epochs' ends, checkpoints) and the end; None without recorded phases."""
    ph = summary.get("phases")
    if not isinstance(ph, dict) or not isinstance(ph.get("total"), (int, float)):
        return None
    training, pauses = ph.get("training", ph.get("steps")), ph.get("pauses", 0.0)
    setup = sum(v for k, v in ph.items() if k in ("start", "imports", "model", "trainer", "setup", "first_batch")
                and isinstance(v, (int, float)))
    parts = [f"setup {setup:.1f} s", f"training steps {training or 0:.1f} s"]
    if pauses:
        parts.append(f"pauses {pauses:.1f} s (validation, the epochs' ends)")
    parts.append(f"end {ph.get('end') or 0:.1f} s")
    scope = "" if summary.get("bounded") is False else " (a bounded profile, not the whole training)"
    return f"{ph['total']:.1f} s{scope}: " + ", ".join(parts)
