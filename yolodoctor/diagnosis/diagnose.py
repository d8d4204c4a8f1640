"""Diagnose a run directory: its facts, the rules, the findings (shared by `diagnose`, `profile`, `demo` and the
monitor)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yolodoctor.diagnosis import facts as facts_mod
from yolodoctor.diagnosis.engine import Outcome, evaluate
from yolodoctor.diagnosis.rules import Compiled, builtin_rules, load_rules
from yolodoctor.errors import InputError
from yolodoctor.findings import Finding
from yolodoctor.record import profile as record
from yolodoctor.record import rederive


@dataclass
class Diagnosis:
    run_dir: Path
    profile: record.Profile
    facts: dict[str, Any]
    findings: list[Finding]
    outcomes: list[Outcome]
    ending: list[Finding]  # how the training ended (the rules over the end.* facts: MM201, ST203, ST204)

    @property
    def reported(self) -> list[Finding]:
        """What a command reports: how the training ended first, then the performance diagnosis."""
        return self.ending + self.findings


def diagnose(run_dir: str | Path, rule_dirs: list[str | Path] | None = None,
             rules: list[Compiled] | tuple[Compiled, ...] | None = None) -> Diagnosis:
    run = Path(run_dir)
    prof = record.load(run)
    if rederive.stale(prof.summary) and record.run_file(run, prof, "events", record.EVENTS).parent == run:
        with contextlib.suppress(OSError, ValueError, TypeError, KeyError):  # a damaged stream keeps the record's own
            prof.summary, rows = rederive.resummarise(run, prof.summary)
            if rows:
                prof.ranks = rows
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
    return Diagnosis(run, prof, facts, findings, outcomes, ending_findings(prof, rules))


def ending_findings(prof: record.Profile, rules: list[Compiled] | tuple[Compiled, ...] | None = None) -> list[Finding]:
    """How the training ended, as findings: the rules over the end.* facts (MM201, ST203, ST204)."""
    return evaluate(rules if rules is not None else builtin_rules(), facts_mod.ending(prof))[0]
