"""The figures BENCHMARKS.md and docs/ give for `check` on 20,000 images, the monitor's CPU, a trial's parts and the
time to a written profile are the ones their results files in bench/results/ hold, as the scripts that wrote those
files derive them."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import check_20k
import report_profiler_gpu

ROOT = Path(__file__).resolve().parents[2]

BENCHMARKS = (ROOT / "BENCHMARKS.md").read_text()


def section(title: str) -> str:
    start = BENCHMARKS.index(title)
    nxt = re.search(r"^##+ ", BENCHMARKS[start + len(title):], re.M)
    return BENCHMARKS[start:start + len(title) + (nxt.start() if nxt else len(BENCHMARKS))]


def named_result(text: str, pattern: str) -> dict:
    m = re.search(r"`(bench/results/" + pattern + r")`", text)
    assert m, f"no results file matching {pattern} named"
    return json.loads((ROOT / m.group(1)).read_text())


def test_check_20k_table_is_its_results_file() -> None:
    text = section("## `check` on 20,000 images")
    res = named_result(text, r"check-20k-cpu-\d{4}-\d\d-\d\d\.json")
    assert res["images"] == 20000 and res["machine"]["usable_cores"] and res["date"] in text
    assert len(res["runs"]) == 2 * res["repeats"] and all(r["stages"] and r["seconds"] > 0 for r in res["runs"])
    for row in check_20k.table_rows(res["summary"]):
        assert row in text


def test_monitor_cpu_figure_is_its_results_file_in_benchmarks_and_docs() -> None:
    text = section("## What the monitor costs")
    res = named_result(text, r"monitor-cpu-\d{4}-\d\d-\d\d\.json")
    row = (f"| {res['mode']} | {res['refresh_s']:g} s | {res['seconds']:g} s | {res['cpu_s']:.2f} | "
           f"{res['cpu_pct_of_one_core']:g} | {res['startup_cpu_s']:.2f} |")
    assert row in text
    monitor = (ROOT / "docs" / "monitor.md").read_text()
    assert f"used {res['cpu_pct_of_one_core']:g}% of one core" in monitor
    cited = re.search(r"bench/results/monitor-cpu-\d{4}-\d\d-\d\d\.json", monitor)
    assert cited and cited.group(0) in text


def test_time_to_profile_table_is_its_results_file_with_exit_codes() -> None:
    text = section("## Time from start to a written profile")
    res = named_result(text, r"profiler-gpu-[\d-]+\.json")
    rows = report_profiler_gpu.wall_rows(res["profiles"])
    assert "| run | exit code |" in text and all(row in text for row in rows)
    failed = [p["name"] for p in res["profiles"] if p["rc"] != 0]
    assert failed and all(name in report_profiler_gpu.exits(res["profiles"]) for name in failed)


def test_trial_cost_table_is_its_results_file_and_names_the_build_before_the_cut() -> None:
    text = section("### What one trial costs, part by part")
    res = named_result(text, r"trial-cost-cpu-\d{4}-\d\d-\d\d\.json")
    rows = {line.split("|")[1].strip(): [c.replace("**", "").strip() for c in line.split("|")[2:4]]
            for line in text.splitlines() if line.startswith("| ")}

    def cell(build: str, part: str) -> str:
        m = res["summary"][build][part]
        return f"{m['median']:.2f} s ({m['min']:.2f}-{m['max']:.2f})"

    for label, part in (("start", "start"), ("setup", "setup"), (f"steps ({res['steps']})", "steps"),
                        ("end", "end"), ("total", "total")):
        assert rows[label] == [cell("A", part), cell("B", part)], label
    b = res["summary"]["B"]
    assert rows["imports, model and trainer"] == [
        cell("A", "model"), ", ".join(f"{k} {b[k]['median']:.2f} s" for k in ("imports", "model", "trainer"))]
    commit = re.search(r"git worktree add /tmp/before ([0-9a-f]{7,40})`", text)
    assert commit, "the Reproduce line names the build before the cut"
    assert res["builds"]["A"]["commit"].startswith(commit.group(1))
    try:
        git = subprocess.run(["git", "cat-file", "-t", commit.group(1)], cwd=ROOT, capture_output=True, text=True)
    except OSError as e:
        pytest.skip(f"git: {e}")
    if git.returncode == 0:  # not a clone with history (an sdist): nothing more to check
        assert git.stdout.strip() == "commit"
