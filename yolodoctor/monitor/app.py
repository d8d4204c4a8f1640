"""The Textual app. A thread worker polls the source every ``refresh`` seconds (reading files, computing facts and
running the rules off the UI thread) and posts each Snapshot to the app as a message; the handler only updates the
panels. When the run ends the worker stops and the final state stays on screen with how the run ended."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, ClassVar

from rich.markup import escape
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.message import Message
from textual.widgets import DataTable, Footer, Header, Static
from textual.worker import get_current_worker

from yolodoctor.monitor.model import Snapshot
from yolodoctor.monitor.panels import (
    CpuPanel,
    DiskPanel,
    FindingScreen,
    FindingsPanel,
    GpuPanel,
    InfoPanel,
    Panel,
    TrainingPanel,
)

if TYPE_CHECKING:
    from yolodoctor.monitor.source import Source

PANELS = ("gpu", "training", "cpu", "disk", "findings", "info")


class Polled(Message):
    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__()
        self.snapshot = snapshot


class SourceFailed(Message):
    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class MonitorApp(App):
    TITLE = "yolodoctor monitor"
    CSS = """
    .row { height: auto; }
    #bottom { height: 1fr; }
    .panel { border: round $primary; height: auto; padding: 0 1; }
    #findings { width: 2fr; height: 1fr; }
    #info { width: 1fr; height: 1fr; }
    .top, .top > Vertical { height: auto; }
    Digits { width: auto; min-width: 7; margin-right: 1; }
    .metric { height: 1; }
    .metric > .value { width: 19; }
    #cpu .value { width: 24; }
    #disk .value { width: 27; }
    .metric > Sparkline { width: 1fr; }
    .line { height: 1; width: 1fr; }
    #train-loss { width: 16; }
    #train-progress { width: 1fr; }
    #train-progress Bar { width: 1fr; }
    #status { height: 1; background: $boost; padding: 0 1; }
    #status.ended { background: $warning 40%; }
    FindingScreen { align: center middle; }
    #finding-doc { width: 90%; height: 90%; border: thick $primary; background: $surface; padding: 0 1; }
    """
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("p", "pause", "Pause"),
        Binding("d", "open_finding", "Finding doc"),
        Binding("g", "toggle('gpu')", "GPU"),
        Binding("t", "toggle('training')", "Training"),
        Binding("c", "toggle('cpu')", "CPU"),
        Binding("o", "toggle('disk')", "Disk"),
        Binding("f", "toggle('findings')", "Findings"),
        Binding("r", "toggle('info')", "Run"),
    ]

    def __init__(self, source: Source, *, refresh: float = 1.0) -> None:
        super().__init__()
        self.source = source
        self.refresh_s = refresh
        self.rules = {c.rule.id: c.rule for c in getattr(source, "rules", None) or []}  # for their documentation
        self.paused = False
        self.snapshot: Snapshot | None = None
        self.error: str | None = None
        self._status_text = ""
        self._wake = threading.Event()

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(classes="row"):
            yield GpuPanel("gpu")
            yield TrainingPanel("training")
        with Horizontal(classes="row"):
            yield CpuPanel("cpu")
            yield DiskPanel("disk")
        with Horizontal(id="bottom"):
            yield FindingsPanel("findings")
            yield InfoPanel("info")
        yield Static(id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = getattr(getattr(self.source, "state", None), "label", "")
        self.query_one(DataTable).focus()
        self._status()
        self.poll_source()

    @work(thread=True, exclusive=True, group="poll")
    def poll_source(self) -> None:
        worker = get_current_worker()
        while not worker.is_cancelled:
            if not self.paused:
                try:
                    snap = self.source.poll()
                except Exception as e:  # a bug in a source: say it and stop polling, never crash the UI
                    self.post_message(SourceFailed(f"{type(e).__name__}: {e}"))
                    return
                if snap is not None:
                    self.post_message(Polled(snap))
                if getattr(self.source, "done", False):
                    return
            self._wake.wait(self.refresh_s)
            self._wake.clear()

    def on_unmount(self) -> None:
        self.workers.cancel_group(self, "poll")
        self._wake.set()

    def on_polled(self, message: Polled) -> None:
        self.snapshot = snap = message.snapshot
        try:
            for pid in PANELS:
                panel = self.query_one(f"#{pid}", Panel)
                if panel.display:  # a hidden panel catches up when shown again
                    panel.show(snap)
            self._status()
        except NoMatches:  # the last poll arrived while the app was closing
            pass

    def on_source_failed(self, message: SourceFailed) -> None:
        self.error = message.error
        self._status()

    def _status(self) -> None:
        snap, bar = self.snapshot, self.query_one("#status", Static)
        if self.error:
            text = f"[b red]monitor source failed:[/] {escape(self.error)}"
        elif snap is not None and snap.ended:
            text = f"[b]training ended: {escape(snap.ended.text())}[/]" + (
                f" (exit code {snap.ended.exit_code})" if snap.ended.exit_code else "") + " · final state kept"
        elif self.paused:
            text = "[b]paused[/] · p resumes"
        else:
            text = f"live · refresh {self.refresh_s:g} s" + (f" · {escape(snap.waiting)}" if snap and snap.waiting
                                                             else "")
        if text != self._status_text:  # an update re-lays out the screen: only on change
            self._status_text = text
            bar.update(text)
        bar.set_class(bool(snap and snap.ended), "ended")

    # ------------------------------------------------------------------ actions
    def action_pause(self) -> None:
        self.paused = not self.paused
        self._wake.set()
        self._status()

    async def action_toggle(self, panel: str) -> None:  # a panel's key: hide it, or show it again
        widget = self.query_one(f"#{panel}", Panel)
        widget.display = not widget.display
        if widget.display and self.snapshot is not None:
            widget.show(self.snapshot)

    def action_open_finding(self) -> None:
        if self.snapshot is None or not self.query_one("#findings").display:
            return
        rid = self.query_one(FindingsPanel).selected_id()
        finding = next((f for f in self.snapshot.findings if f.id == rid), None)
        if finding is not None:
            self.push_screen(FindingScreen(finding, self.rules.get(finding.id)))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open_finding()
