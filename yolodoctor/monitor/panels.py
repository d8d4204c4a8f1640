"""The monitor's panels: Textual widgets (Sparkline, Digits, ProgressBar, DataTable, Markdown) fed a Snapshot.

Every figure that a source does not give is shown as N/A, with the reason where one is known (no NVML, no GPU, no
samples). Graphs scale from 0 to the peak of what they show (the last HISTORY refreshes that brought data). Text
that comes from the run (paths, arguments, reasons, messages) is escaped: a "[" in it is not markup.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.markup import escape
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import DataTable, Digits, Markdown, ProgressBar, Sparkline, Static

from yolodoctor.diagnosis.rules import Rule
from yolodoctor.findings import Finding
from yolodoctor.monitor.model import Snapshot, _get, _num

NA = "N/A"
BARS = "▁▂▃▄▅▆▇█"


def pct(v: Any, digits: int = 0) -> str:
    return NA if _num(v) is None else f"{v:.{digits}f}%"


def gib(v: Any) -> str:
    return NA if _num(v) is None else f"{v / 2**30:.1f}"


def rate(v: Any) -> str:
    """Bytes/s as MB/s."""
    return NA if _num(v) is None else f"{v / 1e6:.1f} MB/s"


def num(v: Any, fmt: str = ".0f", unit: str = "") -> str:
    return NA if _num(v) is None else f"{v:{fmt}}{unit}"


def set_text(widget: Static, text: str) -> None:
    """Update a Static whose size CSS fixes (height 1, a set width): no layout pass (older Textual always does one)."""
    try:
        widget.update(text, layout=False)
    except TypeError:
        widget.update(text)


def cores(percpu: list | None) -> str:
    """Per-core load on an absolute 0-100% scale, one block character per core."""
    if not percpu:
        return NA
    return "".join(BARS[min(len(BARS) - 1, int(max(v or 0.0, 0.0) / 100.0 * len(BARS)))] for v in percpu)


class Metric(Horizontal):
    """A label with its current value, and its history as a Sparkline."""

    def __init__(self, id: str) -> None:
        super().__init__(id=id, classes="metric")
        self._last: tuple | None = None

    def compose(self) -> ComposeResult:
        yield Static(classes="value")
        yield Sparkline([], summary_function=max)

    def set(self, text: str, history: list[float] | None) -> None:
        data = [0.0, *history] if history else []
        if (text, data) != self._last:  # an update re-lays out and repaints: only on change
            self._last = (text, data)
            set_text(self.query_one(Static), text)
            self.query_one(Sparkline).data = data


class Panel(Vertical):
    """A bordered panel; ``show(snapshot)`` updates it."""

    TITLE = ""

    def __init__(self, id: str) -> None:
        super().__init__(id=id, classes="panel")
        self.border_title = self.TITLE
        self._texts: dict[str, str] = {}

    def show(self, snap: Snapshot) -> None:
        raise NotImplementedError

    def metric(self, id: str, text: str, history: list[float] | None) -> None:
        self.query_one(f"#{id}", Metric).set(text, history)

    def put(self, selector: str, text: str) -> None:
        """Update a Static or Digits, only when its text changed (an update re-lays out and repaints); a Static
        of class "line" (one row, full width) without a layout pass."""
        if self._texts.get(selector) != text:
            self._texts[selector] = text
            widget = self.query_one(selector)
            if isinstance(widget, Static) and widget.has_class("line"):
                set_text(widget, text)
            elif isinstance(widget, (Static, Digits)):
                widget.update(text)


class GpuPanel(Panel):
    TITLE = "GPU"

    def compose(self) -> ComposeResult:
        with Horizontal(classes="top"):
            yield Digits(NA, id="gpu-util-digits")
            with Vertical():
                yield Metric("gpu-util")
                yield Metric("gpu-mem")
                yield Metric("gpu-power")
        yield Static(id="gpu-line", classes="line")

    def show(self, snap: Snapshot) -> None:
        info = (snap.start or {}).get("gpu") or {}
        g = (snap.sample or {}).get("gpu") or {}
        self.border_title = "GPU" + (f" {info.get('index')} · {escape(info['name'])}" if info.get("name") else "")
        self.border_subtitle = f"N/A: {escape(snap.gpu_missing)}" if snap.gpu_missing else ""
        h = snap.history
        self.put("#gpu-util-digits", pct(g.get("util")) if g.get("util") is not None else "-")
        self.metric("gpu-util", f"util  {pct(g.get('util'))}", h["gpu_util"])
        used, total = g.get("mem_used"), g.get("mem_total") or info.get("memory_total")
        self.metric("gpu-mem", f"mem   {gib(used)}/{gib(total)} GiB" if used is not None else f"mem   {NA}",
                    h["gpu_mem"])
        power, limit = g.get("power_w"), info.get("power_limit_w")
        self.metric("gpu-power", f"power {num(power)}/{num(limit)} W" if power is not None else f"power {NA}",
                    h["gpu_power"])
        thr = [t for t in (g.get("throttle") or []) if t not in ("gpu_idle", "applications_clocks_setting")]
        line = (f"SM {num(g.get('sm_clock_mhz'), unit=' MHz')} · {num(g.get('temp_c'), unit='°C')} · "
                f"PCIe rx {rate(_kb(g.get('pcie_rx_kbps')))}")
        self.put("#gpu-line", line + (f" · [b red]throttled: {', '.join(thr)}[/]" if thr else ""))


def _kb(v: Any) -> float | None:
    return v * 1e3 if _num(v) is not None else None


class TrainingPanel(Panel):
    TITLE = "Training"

    def compose(self) -> ComposeResult:
        with Horizontal(classes="top"):
            yield Digits(NA, id="train-rate-digits")
            with Vertical():
                yield Metric("train-rate")
                yield Metric("train-step")
                yield Metric("train-wait")
        with Horizontal(classes="line"):
            yield Static(id="train-loss", classes="line")
            yield ProgressBar(total=1, show_eta=False, id="train-progress")

    def show(self, snap: Snapshot) -> None:
        t, h = snap.train, snap.history
        epoch, epochs = t.get("epoch"), t.get("epochs")
        loss, i, nb = t.get("loss"), t.get("i"), t.get("batches_per_epoch")
        self.border_title = "Training" + (f" · {t['ranks']:.0f} DDP ranks" if t.get("ranks") else "") + (
            f" · epoch {epoch + 1}/{num(epochs)} · batch {i + 1}/{num(nb)}" if epoch is not None and i is not None
            else "")
        self.border_subtitle = escape(snap.waiting or "")
        self.put("#train-rate-digits", num(t.get("images_per_s")) if t.get("images_per_s") is not None else "-")
        self.metric("train-rate", f"img/s {num(t.get('images_per_s'))}", h["images_per_s"])
        self.metric("train-step", f"step  {num(t.get('step_s'), '.3f', ' s')}", h["step_s"])
        share = t.get("data_wait_share")
        self.metric("train-wait", f"data wait {pct(100 * share if share is not None else None)}", h["data_wait"])
        self.put("#train-loss", f"loss {num(loss, '.4g') if isinstance(loss, (int, float)) else loss or NA}")
        bar = self.query_one(ProgressBar)
        bar.display = bool(nb and i is not None)  # never indeterminate: that one animates (and costs CPU)
        if nb and i is not None:
            bar.update(total=nb, progress=i + 1)


class CpuPanel(Panel):
    TITLE = "CPU"

    def compose(self) -> ComposeResult:
        yield Static(id="cpu-cores", classes="line")
        yield Metric("cpu-total")
        yield Metric("cpu-proc")
        yield Metric("cpu-workers")

    def show(self, snap: Snapshot) -> None:
        s = snap.sample or {}
        cpu = s.get("cpu") or {}
        n = cpu.get("count") or (snap.start or {}).get("cpu_count")
        self.border_title = f"CPU · {num(n)} cores" if n else "CPU"
        self.border_subtitle = "" if s else "N/A: no samples"
        self.put("#cpu-cores", f"[green]{cores(cpu.get('percpu'))}[/]")
        h = snap.history
        self.metric("cpu-total", f"total {pct(cpu.get('total'))} · iowait {pct(cpu.get('iowait'))}",
                    h["cpu_total"])
        proc = s.get("proc") or {}
        self.metric("cpu-proc", f"proc {pct(proc.get('cpu'))} · thread {pct(_get(proc, 'thread', 'cpu'))}",
                    h["proc_cpu"])
        w = _get(s, "roles", "train_worker") or {}
        count = w.get("count")
        each = w["cpu"] / count if count and _num(w.get("cpu")) is not None else None
        self.metric("cpu-workers", f"workers {num(count)}×{pct(each)} = {pct(w.get('cpu'))}", h["workers_cpu"])


class DiskPanel(Panel):
    TITLE = "Disk · memory"

    def compose(self) -> ComposeResult:
        yield Metric("disk-read")
        yield Metric("disk-write")
        yield Static(id="disk-mem", classes="line")
        yield Static(id="disk-shm", classes="line")

    def show(self, snap: Snapshot) -> None:
        s = snap.sample or {}
        d, m = s.get("disk") or {}, s.get("mem") or {}
        self.border_subtitle = "" if s.get("disk") else "N/A: no disk counters"
        self.metric("disk-read", f"read  {rate(d.get('read_bps'))} {num(d.get('read_iops'))} IOPS",
                    snap.history["disk_read"])
        self.metric("disk-write", f"write {rate(d.get('write_bps'))} {num(d.get('write_iops'))} IOPS",
                    snap.history["disk_write"])
        self.put("#disk-mem", f"RAM {gib(m.get('used'))}/{gib(m.get('total'))} GiB used, "
                              f"{gib(m.get('available'))} available")
        self.put("#disk-shm", f"/dev/shm {gib(m.get('shm_used'))}/{gib(m.get('shm_total'))} GiB")


SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


class FindingsPanel(Panel):
    TITLE = "Findings"

    def compose(self) -> ComposeResult:
        table: DataTable[str | Text] = DataTable(cursor_type="row", zebra_stripes=True, id="findings-table")
        table.add_columns("severity", "id", "name", "message")
        yield table

    def show(self, snap: Snapshot) -> None:
        self.border_title = "Final diagnosis" if snap.final else "Findings (live window)"
        self.border_subtitle = "enter/d: documentation" if snap.findings else "none"
        table = self.query_one(DataTable)
        rows = [(f.id, f.severity.name, f.name, f.message) for f in snap.findings]
        if rows == getattr(self, "_rows", None):
            return
        selected = self.selected_id()
        self._rows = rows
        table.clear()
        for rid, sev, name, message in rows:
            table.add_row(Text(sev, style=SEVERITY_STYLE[sev]), rid, Text(name), Text(message), key=rid)
        if selected in {r[0] for r in rows}:
            table.move_cursor(row=table.get_row_index(selected))

    def selected_id(self) -> str | None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value


class InfoPanel(Panel):
    TITLE = "Run"

    def compose(self) -> ComposeResult:
        yield Static(id="info-text")

    def show(self, snap: Snapshot) -> None:
        st, spec = snap.settings, snap.spec
        lines = [f"[b]{escape(snap.label)}[/]"]
        if spec.get("command"):
            lines.append("command: " + escape(" ".join(spec["command"])))
        elif spec.get("args"):
            lines.append(escape(" ".join(f"{k}={v}" for k, v in spec["args"].items() if k not in ("project", "name"))))
        if st:
            def pair(key: str) -> str:
                asked, ran = st.get(f"{key}_requested"), st.get(key)
                return f"{ran}" if asked in (None, ran) else f"{ran} (asked {asked})"

            lines += [escape(line) for line in (
                f"device {st.get('device')} · batch {pair('batch')} · workers {pair('workers')}",
                f"imgsz {st.get('imgsz')} · {st.get('precision')} · compile "
                f"{'on' if st.get('compile_active') else 'off'} · cache {st.get('cache') or 'none'}",
                f"epochs {st.get('epochs')} · {st.get('batches_per_epoch')} batches/epoch · accumulate "
                f"{st.get('accumulate')} · mosaic {'on' if st.get('mosaic') else 'off'}")]
        else:
            lines.append("settings: N/A (no training seen yet)")
        self.put("#info-text", "\n".join(lines))


class FindingScreen(ModalScreen):
    """A finding's documentation (from its rule file) and evidence."""

    BINDINGS: ClassVar[list[BindingType]] = [("escape", "dismiss", "Close"), ("q", "dismiss", "Close")]

    def __init__(self, finding: Finding, rule: Rule | None = None) -> None:
        super().__init__()
        self.finding = finding
        self.rule = rule

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="finding-doc"):
            yield Markdown(finding_markdown(self.finding, self.rule))


def finding_markdown(f: Finding, rule: Rule | None = None) -> str:
    from yolodoctor.diagnosis.facts import CATALOGUE

    md = [f"# {f.id} {f.name}", f"*{f.category} · {f.severity.name}*", "", f.message, "", "## Evidence", "",
          "| fact | value | meaning |", "|---|---|---|"]
    for k, v in f.evidence.items():
        shown = f"{v:.4g}" if isinstance(v, float) else str(v)
        md.append(f"| `{k}` | {shown} | {CATALOGUE.get(k, ('', ''))[1]} |")
    if f.fix:
        fx = f.fix
        change = ", ".join(f"{k}={v}" for k, v in {**fx.args, **fx.env, **fx.torch_flags}.items()) or fx.note or "-"
        saved = f", saves about {fx.seconds_saved_per_epoch:.0f} s per epoch" if fx.seconds_saved_per_epoch else ""
        md += ["", "## Suggested change", "", f"`{change}` ({fx.safety}{saved})"]
    if rule is not None:
        md += ["", "## What it detects", "", rule.docs.what, "", "## Why it matters", "", rule.docs.why,
               "", "## Fix", "", rule.docs.fix]
    md += ["", "*escape or q: close*"]
    return "\n".join(md)
