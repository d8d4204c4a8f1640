"""Safety: what yolodoctor reads cannot make it run code, hang, or write where it should not.

Already covered elsewhere (not repeated here):
  - rule conditions, fix expressions and message templates that try to call, import, open or reach attributes are
    refused with exit 2: tests/diagnosis/test_rules.py (test_bad_rules_are_rejected_with_file_and_id,
    test_cli_rejects_a_malicious_rule_with_exit_2);
  - `check` never runs a data.yaml's download: field (Python or shell), below the CLI:
    tests/check/test_dataset.py (test_download_field_is_never_executed, test_bash_download_is_never_run);
  - `fix --verify/--apply` refuses to replay a run directory recorded on another machine without --yes:
    tests/fixing/test_trials.py::test_replaying_a_foreign_run_needs_yes;
  - `profile --out` refuses an existing directory: tests/profiling/test_profile_e2e.py;
    `compare --html` refuses to overwrite a file it did not write: tests/commands/test_compare.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import ClassVar

import pytest
from reliability_support import bounded, cli, one_line_error, snapshot, yd

from yolodoctor.record import profile as record

pytestmark = pytest.mark.xdist_group("reliability")  # one worker: conftest.py says why

GOOD = """
id: XX101
name: slow-steps
category: launch
severity: warning
facts: [run.step_s, run.batch]
condition: run.step_s > 0.05
message: "steps take {run.step_s:.2f} s"
docs: {what: slow steps, why: time, fix: bigger batch}
"""
BOMB = "{" + ", ".join(["a0: &a0 [x, x, x, x, x, x, x, x, x]"] + [
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]) + "}"
NESTED_MAP = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]"
for _v in "abcdefg":
    NESTED_MAP = f"[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map({_v}, {NESTED_MAP})"


@pytest.mark.parametrize("change,needle", [
    (("id: XX101", "id: !!python/object/apply:os.system ['touch {marker}']"), "not valid YAML"),
    (("docs:", "x: !!python/name:os.system\ndocs:"), "not valid YAML"),
    (("docs:", f"fix: {{args: {BOMB}}}\ndocs:"), "aliases expand"),  # billion laughs: 9^10 nodes from 90 aliases
    (("docs:", "fix: {args: &a {batch: *a}}\ndocs:"), "refers to itself"),
    (("condition: run.step_s > 0.05", f"condition: size({NESTED_MAP}) > 0"), "comprehension macro map"),
    (("condition: run.step_s > 0.05", "condition: run.step_s > 0.05 && [1].exists(x, x > 0)"), "macro exists"),
    (('"steps take {run.step_s:.2f} s"', '"{run.step_s:>{run.batch}}"'), "format spec may not hold a field"),
    (('"steps take {run.step_s:.2f} s"', '"{run.step_s:>999999999}"'), "widths and precisions"),
])
def test_rule_files_cannot_run_code_or_hang(change, needle, tmp_path):
    """Beyond the expression and template attacks of test_rules.py: YAML tags that construct Python objects, alias
    bombs, self-referencing documents, CEL loops (comprehension macros, exponential when nested: six levels took
    93 s) and format specs that nest fields or ask for a gigabyte of padding are all refused at load, at once."""
    from yolodoctor.diagnosis.rules import RuleError, load_rules

    marker = tmp_path / "pwned"
    d = tmp_path / "rules"
    d.mkdir()
    (d / "r.yaml").write_text(GOOD.replace(change[0], change[1].replace("{marker}", str(marker))))
    with bounded(10), pytest.raises(RuleError) as e:
        load_rules([d], builtin=False)
    assert needle in str(e.value) and "r.yaml" in str(e.value)
    assert not marker.exists()


def test_data_yaml_alias_bomb_is_a_finding_not_a_hang(tmp_path):
    (tmp_path / "data.yaml").write_text(f"train: images\nval: images\nnames: {BOMB}\n")
    code, out, err = cli(["check", f"data={tmp_path / 'data.yaml'}", "--json", "--warm"], seconds=20)
    assert code == 1, err
    hit = next(f for f in json.loads(out)["findings"] if f["id"] == "DS001")
    assert "aliases expand" in hit["message"]


# ---------------------------------------------------------------------------------------------------------------------
# data.yaml download: never reached


def trap(dataset: Path, where: Path, marker: Path) -> Path:
    """A copy of ``dataset`` whose val path is missing and whose download: field would write ``marker`` - exactly
    when Ultralytics' check_det_dataset runs it (Python through exec)."""
    shutil.copytree(dataset.parent, where)
    (where / "data.yaml").write_text(
        f'path: "{where}"\ntrain: images/train\nval: images/missing\nnames: {{0: disc, 1: box, 2: star}}\n'
        f"download: |\n  from pathlib import Path\n  Path({str(marker)!r}).write_text('ran')\n")
    return where / "data.yaml"


def test_no_command_reaches_the_download_field(dataset, profiled, tmp_path):
    marker = tmp_path / "DOWNLOAD_RAN"
    data = trap(dataset, tmp_path / "ds", marker)
    # check: a missing val path is a finding that says Ultralytics would run download: - check does not
    code, out, err = cli(["check", f"data={data}", "--json", "--warm"])
    assert code == 1 and "download" in json.dumps(json.loads(out)["findings"]), err
    # profile: the pre-flight check stops it before any training (exit 2)
    p = yd("profile", f"data={data}", "imgsz=64", "--steps", "2", cwd=tmp_path)
    assert p.returncode == 2 and one_line_error(p.stderr), p.stderr
    # fix --apply replays recorded arguments without a pre-flight check: the training it launches runs Ultralytics'
    # dataset check with autodownload off, so the val path missing ends that training instead
    run = tmp_path / "prof"
    shutil.copytree(profiled.run, run)
    doc = json.loads((run / "profile.json").read_text())
    doc["args"].update(data=str(data), project=str(tmp_path / "ul"))
    (run / "profile.json").write_text(json.dumps(doc))
    p = yd("fix", run, "--apply", "--try", "workers=1", "--json", cwd=tmp_path)  # a change: --apply relaunches
    assert not marker.exists()
    assert p.returncode == 1, p.stderr[-2000:]
    applied = json.loads(p.stdout)["applied"]
    assert applied["status"] == "incomplete" and "images not found" in applied["attempts"][-1]["reason"], applied


# ---------------------------------------------------------------------------------------------------------------------
# fix --apply: argv lists, an allow-list, no clobbering


class FakeProcess:
    """Stands in for subprocess.Popen: records what would be launched; a training child "completes" at once."""

    launched: ClassVar[list[tuple[list[str], dict]]] = []

    def __init__(self, argv, **kw):
        from yolodoctor.record.events import EventWriter

        FakeProcess.launched.append((argv, kw))
        self.pid, self.returncode = os.getpid(), 0
        if "yolodoctor.profiling.child" in argv:
            w = EventWriter(Path(kw["env"]["YOLODOCTOR_RUN_DIR"]) / "events.jsonl")
            w.write("run_end", status="complete", reason=None, steps=0, bounded=False)
            w.close()

    def poll(self):
        return self.returncode

    def wait(self, timeout=None):
        return self.returncode

    def send_signal(self, signum):
        pass

    def kill(self):
        pass


REAL_POPEN = subprocess.Popen


def fake_popen(argv, *args, **kw):
    """yolodoctor's own processes (the training child, the sampler) are faked; anything else (ctypes looking up a
    library, say) runs for real."""
    if any("yolodoctor.profiling" in str(a) for a in argv):
        return FakeProcess(argv, **kw)
    return REAL_POPEN(argv, *args, **kw)


HOSTILE_RULE = """
id: XX999
name: hostile-fix
category: config
severity: error
facts: [run.step_s]
condition: run.step_s > 0.0
message: "always"
fix:
  args: {data: "'/etc/passwd'", project: "'/tmp/elsewhere'", model: "'evil.pt'", batch: "2"}
  env: {LD_PRELOAD: "'/tmp/evil.so'", PYTHONPATH: "'/tmp'", PYTORCH_CUDA_ALLOC_CONF: "'expandable_segments:True'"}
  torch_flags: {cudnn.enabled: false, cuda.matmul.allow_tf32: true}
  safety: safe
docs: {what: a, why: b, fix: c}
"""


def test_fix_apply_launches_an_argv_list_with_only_allow_listed_changes(profiled, tmp_path, monkeypatch):
    from yolodoctor.commands import fix
    from yolodoctor.fixing.fix import FixOptions

    run = tmp_path / "prof"
    shutil.copytree(profiled.run, run)
    doc = json.loads((run / "profile.json").read_text())
    hostile = {"name": f"x; touch {tmp_path / 'pwned'}", "project": f"$(touch {tmp_path / 'pwned2'})"}
    doc["args"].update(hostile)
    (run / "profile.json").write_text(json.dumps(doc))
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "x.yaml").write_text(HOSTILE_RULE)
    (tmp_path / "fix-prof").mkdir()  # an earlier fix run: must not be reused
    (tmp_path / "fix-prof" / "keep.txt").write_text("mine")
    FakeProcess.launched = []
    monkeypatch.setattr(subprocess, "Popen", fake_popen)
    monkeypatch.chdir(tmp_path)
    opts = FixOptions(allow_unsafe=True, rule_dirs=[rules], apply=True, tries=["amp=False"])
    assert fix.run(run, opts, as_json=True) == 0
    children = [(argv, kw) for argv, kw in FakeProcess.launched if "yolodoctor.profiling.child" in argv]
    assert len(children) == 1  # the plan completed: no rollback
    argv, kw = children[0]
    new = tmp_path / "fix-prof-2"
    assert argv == [sys.executable, "-m", "yolodoctor.profiling.child", str(new)]  # a list; nothing from the profile
    assert not kw.get("shell") and all(isinstance(a, str) for a in argv)
    spec = json.loads((new / "spec.json").read_text())
    changed = {k: v for k, v in spec["args"].items() if doc["args"].get(k) != v}
    # the rule's data, project, model: not on the allow-list; its batch=2 another schedule, left out untried
    assert changed == {"amp": False}
    assert spec["args"]["name"] == hostile["name"] and spec["args"]["project"] == hostile["project"]  # data only
    assert spec["env"] == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    assert spec["torch_flags"] == {"cuda.matmul.allow_tf32": True}
    assert "LD_PRELOAD" not in kw["env"] or kw["env"]["LD_PRELOAD"] == os.environ.get("LD_PRELOAD")
    assert (tmp_path / "fix-prof" / "keep.txt").read_text() == "mine"
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()


def test_a_foreign_replay_keeps_ultralytics_out_of_the_recorded_folders(profiled, tmp_path, monkeypatch):
    """With --yes a run recorded elsewhere is replayed, but not its output folders: project=/ and name=../../ of a
    profile.json from another machine do not tell Ultralytics where to write here."""
    from yolodoctor.commands import fix
    from yolodoctor.fixing.fix import FixOptions

    run = tmp_path / "prof"
    shutil.copytree(profiled.run, run)
    doc = json.loads((run / "profile.json").read_text())
    doc["host"] = "elsewhere/0123456789ab"
    doc["args"].update(project="/etc/yolodoctor-should-not-write-here", name="../../../escaped")
    (run / "profile.json").write_text(json.dumps(doc))
    FakeProcess.launched = []
    monkeypatch.setattr(subprocess, "Popen", fake_popen)
    monkeypatch.chdir(tmp_path)
    assert fix.run(run, FixOptions(apply=True, yes=True, tries=["workers=1"]), as_json=True) == 0
    spec = json.loads((tmp_path / "fix-prof" / "spec.json").read_text())
    assert "project" not in spec["args"] and "name" not in spec["args"]
    assert spec["args"]["data"] == doc["args"]["data"]  # the training itself is what was recorded


def test_no_shell_and_no_eval_anywhere_in_yolodoctor():
    """Static: no module of the package starts a shell (shell=True, os.system, os.popen) or evaluates text as code
    (eval, exec, compile): every process is an argv list, every rule a CEL program."""
    import ast

    import yolodoctor

    bad = []
    for path in Path(yolodoctor.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f"{getattr(f.value, 'id', '?')}.{f.attr}" \
                if isinstance(f, ast.Attribute) else ""
            if name in ("eval", "exec", "compile", "os.system", "os.popen") or any(
                    k.arg == "shell" and not (isinstance(k.value, ast.Constant) and k.value.value is False)
                    for k in node.keywords):
                bad.append(f"{path.name}:{node.lineno} {name or 'shell='}")
    assert bad == []


def test_the_training_child_refuses_torch_flags_off_the_allow_list():
    from yolodoctor.profiling.child import apply_torch_flags

    with pytest.raises(ValueError, match="not one yolodoctor may change"):
        apply_torch_flags({"cudnn.enabled": False})


def test_run_directories_are_never_reused(tmp_path):
    """Sixteen profiles starting at once get sixteen directories; an existing one is never taken over."""
    from yolodoctor.record.rundir import exclusive_dir, new_run_dir

    (tmp_path / "profile").mkdir()
    (tmp_path / "profile" / "mine.txt").write_text("x")
    made: list[Path] = []
    threads = [threading.Thread(target=lambda: made.append(new_run_dir(tmp_path))) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(made)) == 16 and tmp_path / "profile" not in made
    assert (tmp_path / "profile" / "mine.txt").read_text() == "x"
    with pytest.raises(FileExistsError):
        exclusive_dir(made[0])


# ---------------------------------------------------------------------------------------------------------------------
# A run directory from elsewhere


def test_a_foreign_run_directory_cannot_steer_writes_or_hang_reads(profiled, tmp_path):
    """profile.json names files outside the run directory and a device that never ends, its events.jsonl is a FIFO,
    its arguments point Ultralytics at other folders, its host is another machine. diagnose, fix (the plan) and
    compare read it without hanging and write nothing but the report asked for; --apply/--verify refuse it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "events.jsonl").write_text('{"type": "step", "t0": 0, "t1": "x"}\n')
    run = tmp_path / "box" / "foreign"
    run.parent.mkdir()
    shutil.copytree(profiled.run, run)
    (run / "events.jsonl").unlink()
    os.mkfifo(run / "events.jsonl")  # reading it would wait for a writer forever
    doc = json.loads((run / "profile.json").read_text())
    doc["host"] = "elsewhere/0123456789ab"
    doc["files"] = {"events": "../../outside/events.jsonl", "samples": "/dev/zero", "trace": "/etc/passwd",
                    "spec": "../../../x"}
    doc["args"].update(project=str(outside / "ul"), name="../../escaped")
    (run / "profile.json").write_text(json.dumps(doc))
    before = snapshot(tmp_path)
    html = run.parent / "report.html"
    for argv, ok in ((["diagnose", run, "--json"], (0, 1)), (["fix", run, "--json"], (0,)),
                     (["compare", profiled.run, run, "--json", "--html", html], (0,))):
        code, out, err = cli(argv, seconds=20)  # a hang fails here
        assert code in ok and "internal error" not in err, (argv, err)
        json.loads(out)
    assert html.exists()
    html.unlink()
    for flag in ("--apply", "--verify"):
        code, out, err = cli(["fix", run, flag], seconds=20)
        assert code == 2 and "needs --yes" in err and one_line_error(err)
    assert snapshot(tmp_path) == before  # nothing written anywhere (the FIFO is still just a FIFO)
    assert not (tmp_path / "escaped").exists() and not (outside / "ul").exists()
    assert record.load(run).files["events"] == "../../outside/events.jsonl"  # read, never followed
