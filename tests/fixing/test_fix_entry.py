"""fixing/fix.py is fix's one entry: `yolodoctor fix` and `yolodoctor demo` call it and only parse and print; it plans,
refuses what cannot be honoured, and hands the caller the plan before any trial."""

import ast
from pathlib import Path

import pytest
from rich.console import Console

from yolodoctor.errors import UsageError
from yolodoctor.fixing.fix import FixOptions, fix

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "fixtures" / "profiles" / "h200-workers0"


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


@pytest.mark.parametrize("command", ["fix", "demo"])
def test_the_commands_go_through_the_one_entry_and_decide_nothing_themselves(command):
    imported = _imports(ROOT / "yolodoctor" / "commands" / f"{command}.py")
    assert "yolodoctor.fixing.fix.fix" in imported or "yolodoctor.fixing.fix.FixOptions" in imported
    inner = {m for m in imported if m.startswith(("yolodoctor.fixing.trials", "yolodoctor.fixing.planner.plan",
                                                  "yolodoctor.fixing.candidates.candidates", "yolodoctor.fixing.budget",
                                                  "yolodoctor.fixing.apply.relaunch"))}
    assert inner == set()
    assert not any(m.startswith("yolodoctor.commands.fix._") for m in imported)  # nothing private across commands


def test_the_plan_alone_is_shown_before_anything_runs():
    shown = []
    r = fix(RUN, FixOptions(), log=lambda m: None, err=Console(quiet=True), on_plan=shown.append)
    assert shown == [r.plan] and r.trials is None and r.applied is None and r.estimate is None
    assert next(f"{c.key}={c.after}" for c in r.plan.changes) == "workers=5"  # DL201's change first


def test_a_replay_of_another_machines_run_needs_consent_and_unsafe_tries_need_allow_unsafe():
    with pytest.raises(UsageError, match="needs --yes"):
        fix(RUN, FixOptions(verify=True), log=lambda m: None, err=Console(quiet=True))
    with pytest.raises(UsageError, match="--allow-unsafe"):
        fix(RUN, FixOptions(tries=["batch=128"]), log=lambda m: None, err=Console(quiet=True))
