"""One catalogue of findings: every finding a command can report comes from a rule file, which `yolodoctor rules`
lists and documents.

Two ways to see it: statically, no code outside the rule engine builds a Finding, and every finding id the package's
code names is a rule; and by running the commands, check over every fixture dataset (and argument mixes that trip
the configuration, resource and environment rules) and diagnose over every recorded profile (and how a training can
end), whose findings' ids must all be listed.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from yolodoctor.cli import main
from yolodoctor.diagnosis.diagnose import ending_findings
from yolodoctor.record.profile import Profile

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "yolodoctor"
DATASETS = ROOT / "fixtures" / "datasets"
PROFILES = ROOT / "fixtures" / "profiles"
ENGINE = PACKAGE / "diagnosis" / "engine.py"
RULE_ID = re.compile(r"^[A-Z]{2,3}\d{3}$")


def cli_json(*args: str) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as e:
        main([*args, "--json"])
    assert e.value.code in (0, 1), out.getvalue()[-500:]
    return json.loads(out.getvalue())


@pytest.fixture(scope="module")
def listed() -> dict[str, dict]:
    """The rules `yolodoctor rules --json` lists, by id."""
    return {r["id"]: r for r in cli_json("rules")["rules"]}


def _sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_no_code_outside_the_engine_builds_a_finding():
    builders = []
    for path in _sources():
        if path == ENGINE:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                if name == "Finding":
                    builders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert builders == [], "findings built outside the rule engine (make them rules in rules/): " + ", ".join(builders)


def test_every_finding_id_the_code_names_is_a_rule(listed):
    named = {}
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and RULE_ID.match(node.value):
                named.setdefault(node.value, f"{path.relative_to(ROOT)}:{node.lineno}")
    assert {i: w for i, w in named.items() if i not in listed} == {}


def test_every_listed_rule_is_documented(listed):
    assert len(listed) >= 80
    for rid, r in listed.items():
        assert all(r["docs"][k].strip() for k in ("what", "why", "fix")), rid
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as e:
            main(["rules", rid])
        assert e.value.code == 0 and "What it detects" in out.getvalue() and "How to fix" in out.getvalue(), rid


CHECK_ARGS = [
    [],
    ["workers=64", "batch=128", "cache=ram", "amp=bf16", "compile=True", "imgsz=1280"],
    ["device=cpu", "amp=True", "batch=-1", "model=yolo11n.pt", "--torch-flag", "cudnn.benchmark=true"],
    ["model=/nowhere/mine.pt", "device=0", "plots=True"],
    ["device=0,1", "batch=0.5", "deterministic=True"],
]


def test_every_id_check_and_diagnose_emit_is_listed(listed, monkeypatch):
    monkeypatch.setenv("YOLO_OFFLINE", "1")
    seen: dict[str, str] = {}
    datasets = sorted(d for d in DATASETS.iterdir() if (d / "data.yaml").exists())
    assert len(datasets) >= 25
    for d in datasets:
        for f in cli_json("check", f"data={d / 'data.yaml'}", "--warm")["findings"]:
            seen.setdefault(f["id"], f"check {d.name}")
    for args in CHECK_ARGS:
        data = [] if not args else [f"data={DATASETS / 'ok-detect' / 'data.yaml'}"]
        for f in cli_json("check", *data, *args, "--warm")["findings"]:
            seen.setdefault(f["id"], f"check {' '.join(args)}")
    runs = sorted(p for p in PROFILES.iterdir() if (p / "profile.json").exists())
    assert runs
    for run in runs:
        for f in cli_json("diagnose", str(run))["findings"]:
            seen.setdefault(f["id"], f"diagnose {run.name}")
    for reason in ("out-of-memory: CUDA out of memory", "nan: loss is nan", "crashed: ValueError",
                   "the training process was killed by SIGKILL"):
        prof = Profile(status="incomplete", reason=reason, exit_code=1, summary={"steps": 3}, settings={"batch": 16})
        for f in ending_findings(prof):
            seen.setdefault(f.id, f"ending {reason}")
    assert {i: w for i, w in seen.items() if i not in listed} == {}
    # the runs above reach every family of rules: the dataset's, check's and the profile's, and how a run ended
    assert {"DS001", "DS101", "DS111", "DS011", "CF104", "EN113", "MM201", "ST204", "LA201"} <= set(seen)



RUN_ONLY = ("run.", "settings.", "trace.", "end.", "ranks.", "ul.")  # facts only a training's record holds


def test_rule_names_are_unique_and_ids_follow_the_scheme_yolodoctor_rules_prints():
    from yolodoctor.commands.diagnose import ID_SCHEME
    from yolodoctor.diagnosis.rules import shipped_rules

    rules = [c.rule for c in shipped_rules()]
    names = [r.name for r in rules]
    assert len(set(names)) == len(names), sorted(n for n in names if names.count(n) > 1)
    for r in rules:
        assert f" {r.id[:2]} " in f" {ID_SCHEME.replace('(', ' ')} " or f"({r.id[:2]} " in ID_SCHEME, r.id
        reads_run = [any(f.startswith(RUN_ONLY) for f in [*fm.facts, *(fm.optional or [])]) for fm in r.all_forms]
        if r.id[-3] == "2":  # only from a training: every form reads a training's record
            assert all(reads_run), r.id
        else:  # before training: at least one form reads what is known then
            assert not all(reads_run), r.id
