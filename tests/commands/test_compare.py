"""`yolodoctor compare RUN_A RUN_B`: deltas and findings on the recorded H200 runs, the JSON contract, the HTML
report."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from yolodoctor.errors import InputError, UsageError
from yolodoctor.presentation.comparison import compare, to_json
from yolodoctor.presentation.html import MARKER, check_writable, write_html

ROOT = Path(__file__).resolve().parents[2]
PROFILES = ROOT / "fixtures" / "profiles"
A, B = PROFILES / "h200-workers0", PROFILES / "h200-defaults"


def ips(run):  # the recorded steady images/s, read from the profile itself
    return json.loads((run / "profile.json").read_text())["summary"]["images_per_s"]


RATIO = ips(B) / ips(A)
KEYS = {"schema", "command", "findings", "facts", "run_dir", "runs", "deltas", "resolved", "new", "persisting",
        "comparable", "mismatch", "warnings"}


def yd(*args, timeout=120):
    p = subprocess.run([sys.executable, "-m", "yolodoctor", *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, cwd=ROOT, env={**os.environ, "YOLO_OFFLINE": "1"})
    return p.returncode, p.stdout, p.stderr


def one_line_error(err):
    lines = [line for line in err.splitlines() if line.strip()]
    return "Traceback" not in err and len(lines) == 1 and lines[0].startswith("yolodoctor: error:")


@pytest.fixture(scope="module")
def cmp():
    return compare(A, B)


def test_deltas_and_findings_in_process(cmp):
    d = cmp.deltas["run.images_per_s"]
    assert d["ratio"] == pytest.approx(RATIO, rel=1e-9)
    assert cmp.deltas["run.epoch_s"]["ratio"] == pytest.approx(1 / RATIO, rel=1e-3)
    assert cmp.deltas["run.data_wait_share"]["delta"] < -0.6
    for fact in ("gpu.util_mean", "trace.gpu_busy_share", "gpu.mem_fraction_peak", "gpu.mem_used_max",
                 "cpu.train_thread_pct", "loader.capacity_images_per_s"):
        assert cmp.deltas[fact]["a"] is not None and cmp.deltas[fact]["b"] is not None, fact
    assert "DL201" in cmp.resolved and "DL201" not in cmp.new + cmp.persisting
    assert "LA201" in cmp.new
    assert set(cmp.persisting) >= {"IO201", "CF201"}
    assert cmp.comparable and cmp.warnings == [] and cmp.mismatch == {}


def test_same_run_twice_is_ratio_one():
    c = compare(B, B)
    assert c.deltas["run.images_per_s"]["ratio"] == pytest.approx(1.0)
    assert c.resolved == [] and c.new == [] and c.persisting


def test_trace_missing_in_b_is_not_resolved():
    c = compare(B, PROFILES / "h200-b64w16-reduce-overhead")  # B skipped the trace on purpose
    assert "SY201" in c.unmeasured and "SY201" not in c.resolved
    assert c.deltas["trace.gpu_busy_share"]["b"] is None and c.deltas["trace.gpu_busy_share"]["ratio"] is None


def _copy(src, dst, **changes):
    shutil.copytree(src, dst)
    prof = json.loads((dst / "profile.json").read_text())
    for key, value in changes.items():
        section, _, field = key.partition("__")
        prof[section][field] = value
    (dst / "profile.json").write_text(json.dumps(prof))
    return dst


def test_not_like_for_like_warns(tmp_path):
    other = _copy(B, tmp_path / "small", settings__imgsz=320,
                  summary__window={"valid": False, "why": "too short", "spans": []})
    c = compare(A, other)
    assert not c.comparable
    assert c.mismatch == {"imgsz": {"a": 640, "b": 320}}
    assert any("too short" in w for w in c.warnings)
    j = to_json(c)
    assert j["comparable"] is False and j["mismatch"]["imgsz"]["b"] == 320


def test_cli_json_is_pure_and_complete():
    rc, out, err = yd("compare", A, B, "--json")
    assert rc == 0, err
    j = json.loads(out)  # nothing but JSON on stdout
    assert set(j) >= KEYS
    assert j["schema"] == 1 and j["command"] == "compare" and j["run_dir"] is None
    assert [r["run_dir"] for r in j["runs"]] == [str(A), str(B)]
    assert all({"run_dir", "status", "facts"} <= set(r) for r in j["runs"])
    assert j["deltas"]["run.images_per_s"]["ratio"] == pytest.approx(RATIO, rel=1e-9)
    assert {"a", "b", "ratio"} <= set(j["deltas"]["gpu.mem_used_max"])
    assert "DL201" in j["resolved"]
    assert {f["id"] for f in j["findings"]} == set(j["new"]) | set(j["persisting"])  # the findings of B
    assert j["facts"]["run.images_per_s"] == pytest.approx(ips(B), rel=1e-9)


def test_cli_human_table():
    rc, out, err = yd("compare", A, B)
    assert rc == 0, err
    assert "steady images/s" in out and f"×{RATIO:.2f}" in out and "DL201" in out and "resolved" in out
    # times in the units diagnose uses, share changes in points, both speed-ups named as what they are
    assert " ms " in out and " pp" not in out and "points" in out
    assert "speed-up: " in out and "on the training steps (steady images/s)" in out and "on the wall time" in out
    assert "changed: workers 0 -> -" in out  # B ran Ultralytics' default workers: no argument given


def test_html_report(tmp_path):
    a = _copy(A, tmp_path / "run-<b>before&", args__note="<script>alert(1)</script>")
    page = tmp_path / "report.html"
    rc, _, err = yd("compare", a, B, "--html", page)
    assert rc == 0, err
    text = page.read_text()
    assert MARKER in text[:200]
    assert "run-&lt;b&gt;before&amp;" in text and "h200-defaults" in text
    assert "<script" not in text.lower() and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "<b>before" not in text
    assert len(re.findall(r"<svg", text)) == 3
    for title in ("Step time", "Data wait per step", "GPU utilisation"):
        assert re.search(rf"<svg[^>]*><title>{title}", text), title
    assert text.count("<polyline") == 6  # both runs on each plot
    assert not re.search(r">\d(\.\d+)?e[-+]\d+<", text)  # axis ticks without exponents (2e-04 s read as nothing)
    assert "rotate(-90)\" text-anchor=\"middle\">ms<" in text  # step time and data wait in ms
    assert "DL201" in text and "LA201" in text
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in text


def test_html_overwrites_only_its_own(tmp_path):
    page = tmp_path / "report.html"
    rc, _, err = yd("compare", A, B, "--html", page, "--json")
    assert rc == 0, err
    first = page.read_text()
    rc, out, err = yd("compare", B, A, "--html", page, "--json")  # our own report: replaced
    assert rc == 0, err
    assert json.loads(out)["html"] == str(page)
    assert page.read_text() != first

    foreign = tmp_path / "notes.html"
    foreign.write_text("<html>my notes</html>")
    rc, out, err = yd("compare", A, B, "--html", foreign)
    assert rc == 2 and out == "" and one_line_error(err) and "refusing to overwrite" in err
    assert foreign.read_text() == "<html>my notes</html>"
    with pytest.raises(UsageError):
        check_writable(tmp_path)  # a directory


def test_write_html_in_process(tmp_path, cmp):
    page = tmp_path / "r.html"
    write_html(page, cmp)
    write_html(page, cmp)
    assert page.read_text().count("<svg") == 3


def test_html_where_no_file_can_be_written_is_an_output_error(cmp):
    # /proc exists as a folder but takes no new files (was an internal error)
    from yolodoctor.errors import OutputError

    with pytest.raises(OutputError, match=re.escape("cannot write --html /proc/report.html")):
        write_html("/proc/report.html", cmp)


@pytest.mark.parametrize("args", [
    ["compare", "/nonexistent/run", str(B)],
    ["compare", str(A), "/nonexistent/run", "--json"],
    ["compare", str(A), str(ROOT / "fixtures")],  # a folder that is not a run directory
])
def test_missing_run_dir_exits_2(args):
    rc, out, err = yd(*args)
    assert rc == 2 and out == "" and one_line_error(err), err


def test_missing_run_dir_in_process():
    with pytest.raises(InputError):
        compare(A, "/nonexistent/run")


def _with_probe(src, dst, before, after):
    shutil.copytree(src, dst)
    prof = json.loads((dst / "profile.json").read_text())
    prof["host_probe"] = {"before": {"python_ms": before}, "after": {"python_ms": after}}
    (dst / "profile.json").write_text(json.dumps(prof))
    return dst


def test_a_host_that_moved_between_the_runs_is_noted_not_refused(tmp_path, capsys):
    from rich.console import Console

    from yolodoctor.presentation.comparison import render

    a = _with_probe(A, tmp_path / "a", 15.0, 17.0)  # mean 16 ms
    b = _with_probe(B, tmp_path / "b", 27.0, 29.0)  # mean 28 ms: the machine got 1.75x slower
    c = compare(a, b)
    assert c.a.facts["host.python_ms"] == 16.0 and c.comparable
    assert c.notes == ["the host's own speed differed: a fixed Python loop took 16.0 ms around A and 28.0 ms around "
                       "B; a host-bound run's rate moves with it (a shared machine does this)"]
    assert to_json(c)["notes"] == c.notes
    con = Console(record=True, width=300)
    render(con, c)
    assert "note: the host's own speed differed" in con.export_text()
    write_html(tmp_path / "c.html", c)
    assert "Note: the host&#x27;s own speed differed" in (tmp_path / "c.html").read_text()
    assert compare(a, _with_probe(B, tmp_path / "b2", 16.5, 17.5)).notes == []  # within 15%: nothing to say
    assert compare(A, B).notes == []  # recorded before the probe existed: nothing made up
