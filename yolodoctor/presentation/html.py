"""`compare --html FILE`: one self-contained HTML page (inline CSS and SVG, no script, no network).

The page carries MARKER near its top; an existing FILE is only ever replaced when it carries it too, so a report
written before can be refreshed but nobody else's file is overwritten. Every text that comes from a run directory
goes through html.escape.
"""

from __future__ import annotations

import math
from collections.abc import Set
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yolodoctor.errors import UsageError
from yolodoctor.presentation.comparison import (
    METRICS,
    Comparison,
    change,
    fmt,
    run_name,
)
from yolodoctor.record.events import read_events
from yolodoctor.version import __version__

if TYPE_CHECKING:
    from yolodoctor.diagnosis.diagnose import Diagnosis
    from yolodoctor.findings import Finding

MARKER = "<!-- written by yolodoctor compare: this file may be overwritten by it -->"
COLORS = ("#4c72b0", "#dd8452")  # A, B
W, H, L, R, T, B = 760, 260, 64, 16, 28, 42  # plot size and margins


def check_writable(path: str | Path) -> None:
    """Raise UsageError (exit 2) unless ``path`` is free or a report this command wrote before."""
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"--html {path} is a directory")
    if not path.parent.is_dir():
        raise UsageError(f"--html {path}: directory {path.parent} does not exist")
    if path.exists() or path.is_symlink():
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                head = fh.read(4096)
        except OSError as e:
            raise UsageError(f"--html {path} exists and cannot be read ({e.strerror}); not overwriting it") from None
        if MARKER not in head:
            raise UsageError(f"refusing to overwrite {path}: it was not written by yolodoctor compare")


def write_html(path: str | Path, cmp: Comparison) -> None:
    path = Path(path)
    check_writable(path)
    from yolodoctor.errors import OutputError
    from yolodoctor.record.rundir import write_text_atomic

    try:
        write_text_atomic(path, render_html(cmp))
    except OSError as e:  # a read-only folder, a full disk, a file system that takes no new files (/proc)
        raise OutputError(f"cannot write --html {path}: {e.strerror or e}") from None


# --- series -----------------------------------------------------------------------------------------------------

def series(d: Diagnosis) -> dict[str, Any]:
    """Per-step time and data wait (in ms) against the step index, NVML utilisation against seconds since the first
    step."""
    from yolodoctor.record.profile import run_file

    num = (int, float)
    steps = [e for e in read_events(run_file(d.run_dir, d.profile, "events", "events.jsonl"))
             if e.get("type") == "step" and isinstance(e.get("t0"), num) and isinstance(e.get("t1"), num)]
    out: dict[str, Any] = {"step": [], "wait": [], "util": [],
                           "first_step": ((d.profile.summary or {}).get("window") or {}).get("first_step")}
    for i, e in enumerate(steps):
        n = e.get("n", e.get("step", i))
        wait = float(e["wait"]) if isinstance(e.get("wait"), (int, float)) else 0.0
        out["step"].append((n, 1000 * (e["t1"] - e["t0"] + wait)))
        out["wait"].append((n, 1000 * wait))
    if steps:
        start, end = steps[0]["t0"], steps[-1]["t1"]
        for s in read_events(run_file(d.run_dir, d.profile, "samples", "samples.jsonl")):
            g = s.get("gpu") if s.get("type") == "sample" else None
            t = s.get("t")
            if isinstance(g, dict) and isinstance(g.get("util"), (int, float)) and isinstance(t, (int, float)) \
                    and start <= t <= end:
                out["util"].append((t - start, float(g["util"])))
    return out


# --- SVG --------------------------------------------------------------------------------------------------------

def nice_ticks(hi: float, n: int = 5) -> list[float]:
    if hi <= 0:
        return [0.0]
    raw = hi / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return [i * step for i in range(int(hi / step + 1e-9) + 1)]


def robust_top(all_series: list[list[tuple[float, float]]]) -> float:
    """1.5 x the largest 90th percentile, so that a compile or warm-up step does not flatten the rest; at most the
    largest value."""
    ys = [[y for _, y in s] for s in all_series if s]
    if not ys:
        return 1.0
    p90 = max(sorted(v)[int(0.9 * (len(v) - 1))] for v in ys)
    top = min(1.5 * p90, max(max(v) for v in ys))
    return top if top > 0 else 1.0


def _tick_label(v: float) -> str:
    """A tick as a person reads it: no exponent (0.0002, not 2e-04), at most 4 significant digits."""
    if abs(v) < 1:
        return f"{v:.4f}".rstrip("0").rstrip(".")
    return f"{v:.0f}" if v == int(v) else f"{v:.4g}"


def svg_plot(title: str, lines: list[tuple[str, str, list[tuple[float, float]]]], xlabel: str, ylabel: str,
             ytop: float, unit: str = "", vlines: list[tuple[float, str]] | None = None) -> str:
    """A line plot; values above ``ytop`` are drawn on the top edge and counted under the plot."""
    pts = [p for _, _, s in lines for p in s]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" '
             f'role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>',
             f'<text x="{L}" y="16" class="t">{escape(title)}</text>']
    if not pts:
        parts.append(f'<text x="{W / 2}" y="{H / 2}" text-anchor="middle" class="na">no data in these runs</text>'
                     '</svg>')
        return "".join(parts)
    x0, x1 = min(0.0, min(x for x, _ in pts)), max(x for x, _ in pts)
    x1 = x1 if x1 > x0 else x0 + 1
    pw, ph = W - L - R, H - T - B

    def sx(x: float) -> float:
        return L + (x - x0) / (x1 - x0) * pw

    def sy(y: float) -> float:
        return T + ph - min(max(y, 0.0), ytop) / ytop * ph

    for v in nice_ticks(ytop):
        parts.append(f'<line x1="{L}" x2="{W - R}" y1="{sy(v):.1f}" y2="{sy(v):.1f}" class="g"/>'
                     f'<text x="{L - 6}" y="{sy(v) + 4:.1f}" text-anchor="end">{_tick_label(v)}</text>')
    for v in nice_ticks(x1 - x0):
        parts.append(f'<text x="{sx(x0 + v):.1f}" y="{T + ph + 16}" text-anchor="middle">{_tick_label(x0 + v)}</text>')
    parts.append(f'<rect x="{L}" y="{T}" width="{pw}" height="{ph}" class="f"/>'
                 f'<text x="{L + pw / 2}" y="{H - 6}" text-anchor="middle">{escape(xlabel)}</text>'
                 f'<text transform="translate(14 {T + ph / 2}) rotate(-90)" text-anchor="middle">'
                 f'{escape(ylabel)}</text>')
    for x, color in vlines or []:
        if x0 <= x <= x1:
            parts.append(f'<line x1="{sx(x):.1f}" x2="{sx(x):.1f}" y1="{T}" y2="{T + ph}" stroke="{color}" '
                         f'stroke-dasharray="4 3"/>')
    notes = []
    for k, (label, color, s) in enumerate(lines):
        if not s:
            continue
        coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in s)
        parts.append(f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="1.4">'
                     f'<title>{escape(label)}</title></polyline>')
        parts.append(f'<text x="{W - R - 4}" y="{T + 14 + 14 * k}" text-anchor="end" fill="{color}">'
                     f'{escape(label)}</text>')
        above = [y for _, y in s if y > ytop]
        if above:
            notes.append(f"{escape(label)}: {len(above)} point(s) above the axis, max {max(above):.3g}{unit}")
    svg = "".join(parts) + "</svg>"
    return svg + (f'<p class="note">{"; ".join(notes)}</p>' if notes else "")


# --- page -------------------------------------------------------------------------------------------------------

CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:820px;color:#222}
table{border-collapse:collapse;margin:.6em 0}td,th{padding:.25em .7em;border-bottom:1px solid #ddd;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}.better{color:#1a7f37}.worse{color:#c62828}
.warn{background:#fff4d6;border-left:4px solid #e0a800;padding:.4em .8em}.note,.na{color:#777;font-size:12px}
svg text{font-size:11px;fill:#444}svg .t{font-size:13px;font-weight:600}.g{stroke:#eee}.f{fill:none;stroke:#999}
code{font-size:12px;word-break:break-all}li{margin:.2em 0}"""


def _run_row(side: str, d: Diagnosis) -> str:
    st, args = d.profile.settings or {}, d.profile.args or {}
    args_text = " ".join(f"{k}={v}" for k, v in args.items()) or " ".join(d.profile.command or [])
    status = d.profile.status + (f" ({d.profile.reason})" if d.profile.reason else "")
    cells = [side, run_name(d), str(d.run_dir), status,
             str(st.get("device", "")), str(d.facts.get("gpu.name", "")), str(args.get("model", "")),
             str(st.get("imgsz", "")), args_text]
    return "<tr>" + "".join(f"<td>{escape(c)}</td>" if i != 8 else f"<td><code>{escape(c)}</code></td>"
                            for i, c in enumerate(cells)) + "</tr>"


def _findings(title: str, ids: list[str], source: dict[str, Finding], unknown: Set[str] = frozenset()) -> str:
    items = "".join(f"<li><b>{escape(i)}</b> {escape(source[i].name)} <i>({escape(source[i].severity.name)}"
                    f"{', A could not measure it' if i in unknown else ''})</i>: {escape(source[i].message)}</li>"
                    for i in ids)
    return f"<h3>{escape(title)} ({len(ids)})</h3>" + (f"<ul>{items}</ul>" if ids else "<p class='na'>none</p>")


def render_html(cmp: Comparison) -> str:
    a_name, b_name = run_name(cmp.a), run_name(cmp.b)
    labels = (f"A {a_name}", f"B {b_name}")
    sa, sb = series(cmp.a), series(cmp.b)
    rows = []
    for fact, label, kind, _ in METRICS:
        d = cmp.deltas[fact]
        if d["a"] is None and d["b"] is None:
            continue
        text, verdict = change(d, kind)
        rows.append(f"<tr><td>{escape(label)}</td><td class='n'>{escape(fmt(d['a'], kind))}</td>"
                    f"<td class='n'>{escape(fmt(d['b'], kind))}</td>"
                    f"<td class='n {verdict or ''}'>{escape(text)}</td></tr>")
    warn = "".join(f"<p class='warn'>Not like for like: {escape(w)}</p>" for w in cmp.warnings) + "".join(
        f"<p class='warn'>Note: {escape(n)}</p>" for n in cmp.notes)
    by_a = {f.id: f for f in cmp.a.findings}
    by_b = {f.id: f for f in cmp.b.findings}
    unknown_a = {o.rule for o in cmp.a.outcomes if o.state in ("missing", "error")}
    vl = [(s["first_step"], c) for s, c in ((sa, COLORS[0]), (sb, COLORS[1]))
          if isinstance(s["first_step"], (int, float))]

    def lines(key: str) -> list[tuple[str, str, list[tuple[float, float]]]]:
        return [(labels[0], COLORS[0], sa[key]), (labels[1], COLORS[1], sb[key])]

    plots = [
        svg_plot("Step time (data wait + compute)", lines("step"), "step", "ms",
                 robust_top([sa["step"], sb["step"]]), " ms", vl),
        svg_plot("Data wait per step", lines("wait"), "step", "ms",
                 robust_top([sa["wait"], sb["wait"]]), " ms", vl),
        svg_plot("GPU utilisation (NVML, device-wide)", lines("util"), "seconds since the first step", "%",
                 100.0, " %"),
    ]
    return f"""<!DOCTYPE html>
{MARKER}
<html lang="en"><head><meta charset="utf-8"><title>yolodoctor compare: {escape(a_name)} → {escape(b_name)}</title>
<style>{CSS}</style></head><body>
<h1>yolodoctor compare</h1>
<p><b style="color:{COLORS[0]}">A (before)</b> {escape(a_name)} &rarr;
<b style="color:{COLORS[1]}">B (after)</b> {escape(b_name)}</p>
{warn}
<table><tr><th></th><th>run</th><th>directory</th><th>status</th><th>device</th><th>GPU</th><th>model</th>
<th>imgsz</th><th>arguments</th></tr>
{_run_row("A", cmp.a)}{_run_row("B", cmp.b)}</table>
<h2>Summary</h2>
<table><tr><th>metric</th><th>A (before)</th><th>B (after)</th><th>change</th></tr>{"".join(rows)}</table>
<p class="note">Steady figures come from each run's window (dashed line: its first step); the epoch time is the
images per epoch at the steady rate. NVML utilisation is device-wide and averaged over up to a second; the trace's
kernel-busy share is the finer signal.</p>
<h2>Findings</h2>
{_findings("Resolved (in A, not in B)", cmp.resolved, by_a)}
{_findings("New (in B, not in A)", cmp.new, by_b, unknown_a)}
{_findings("Persisting", cmp.persisting, by_b)}
{_findings("Not measured in B (B lacks the facts these rules need)", cmp.unmeasured, by_a) if cmp.unmeasured else ""}
<h2>Over time</h2>
{"".join(f"<figure>{p}</figure>" for p in plots)}
<p class="note">yolodoctor {escape(__version__)}</p>
</body></html>
"""
