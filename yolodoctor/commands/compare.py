"""`yolodoctor compare RUN_A RUN_B [--json] [--html FILE]`."""

from __future__ import annotations

from pathlib import Path

from yolodoctor.presentation import report
from yolodoctor.presentation.comparison import compare, render, to_json


def run_compare(run_a: str | Path, run_b: str | Path, *, as_json: bool, html: Path | None = None) -> int:
    from yolodoctor.console import stderr_console, stdout_console

    if html is not None:
        from yolodoctor.presentation.html import check_writable

        check_writable(html)  # refuse a foreign file before any work
    cmp = compare(run_a, run_b)
    if html is not None:
        from yolodoctor.presentation.html import write_html

        write_html(html, cmp)
        stderr_console().print(f"wrote {html}", markup=False, highlight=False)
    if as_json:
        report.dump_json(to_json(cmp, str(html) if html is not None else None))
    else:
        render(stdout_console(), cmp)
    return 0
