"""Diagnose a run directory: its facts, the rules, the findings (shared by `diagnose` and `profile`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yolodoctor import profile as record
from yolodoctor.diagnosis import facts as facts_mod
from yolodoctor.diagnosis.engine import Outcome, evaluate
from yolodoctor.diagnosis.rules import builtin_rules, load_rules
from yolodoctor.errors import InputError
from yolodoctor.findings import Finding


@dataclass
class Diagnosis:
    run_dir: Path
    profile: record.Profile
    facts: dict[str, Any]
    findings: list[Finding]
    outcomes: list[Outcome]


def diagnose(run_dir: str | Path, rule_dirs: list[str | Path] | None = None, rules=None) -> Diagnosis:
    run = Path(run_dir)
    prof = record.load(run)
    rules = rules if rules is not None else load_rules(rule_dirs) if rule_dirs else builtin_rules()
    try:
        facts = facts_mod.from_profile(prof, run)
        check_facts = prof.check_facts
        if check_facts:
            facts.update({k: v for k, v in facts_mod.from_check(check_facts).items() if k not in facts})
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as e:
        # the facts code reads well-formed records; what it trips on came from a damaged or foreign run directory
        raise InputError(f"cannot read {run}: its records are malformed ({type(e).__name__}: {e})"[:400]) from None
    findings, outcomes = evaluate(rules, facts)
    return Diagnosis(run, prof, facts, findings, outcomes)
