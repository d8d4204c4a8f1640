"""Shared helpers for the benchmarks: machine description, statistics, and writing reports."""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import platform
import re
import statistics
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "BENCHMARKS.md"
REPORTS = ROOT / "bench" / "out" / "reports"  # what the report scripts write; BENCHMARKS.md summarises them


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), else what platform says."""
    model = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as cpuinfo:
        model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "")
    return model or platform.processor()


def machine() -> str:
    cpus = len(os.sched_getaffinity(0))
    mem = psutil.virtual_memory().total / (1 << 30)
    return f"{cpus} usable cores ({cpu_model()}), {mem:.0f} GiB RAM, " \
           f"Python {platform.python_version()}, {platform.system()} {platform.release()}"


def describe_machine() -> dict:
    """The machine a results file was measured on, as its JSON records it."""
    return {"cpu": cpu_model(), "usable_cores": len(os.sched_getaffinity(0)),
            "logical_cpus": os.cpu_count(), "ram_gib": round(psutil.virtual_memory().total / (1 << 30), 1),
            "python": platform.python_version(), "os": f"{platform.system()} {platform.release()}",
            "platform": platform.platform()}


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "spread": (max(values) - min(values)) / statistics.median(values) if statistics.median(values) else 0.0,
            "n": len(values)}


def write_report(name: str, body: str) -> Path:
    """Write a benchmark's full generated report to bench/out/reports/NAME.md (git-ignored) and return its path."""
    REPORTS.mkdir(parents=True, exist_ok=True)
    path = REPORTS / f"{name}.md"
    path.write_text(body.rstrip() + "\n")
    return path


def write_section(name: str, body: str) -> None:
    """Replace (or append) the section between <!-- bench:NAME --> markers in BENCHMARKS.md (for a section that a
    script keeps current; the other sections summarise the reports by hand)."""
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{start}\n{body.rstrip()}\n{end}"
    text = BENCHMARKS.read_text() if BENCHMARKS.exists() else "# Benchmarks\n"
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    BENCHMARKS.write_text(text)


def today() -> str:
    return _dt.datetime.now().strftime("%Y-%m-%d %H:%M")
