"""What every check probe returns: the facts it measured. The rules in rules/ judge them (the rule engine), so a
threshold or a finding's wording lives in a rule file, never here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from yolodoctor.findings import Finding


@dataclass
class ProbeResult:
    facts: dict[str, Any] = field(default_factory=dict)
    given: dict[str, Any] = field(default_factory=dict)  # the facts of the probes before it, which it read

    def merge(self, other: ProbeResult) -> ProbeResult:
        self.facts.update(other.facts)
        return self

    @property
    def findings(self) -> list[Finding]:
        """What the built-in rules make of these facts, beyond what they make of the facts the probe was given alone
        (`check` itself evaluates the rules once over every probe's facts: run.py)."""
        from yolodoctor.diagnosis.engine import evaluate
        from yolodoctor.diagnosis.rules import builtin_rules

        rules = builtin_rules()
        before = {(f.id, f.message) for f in evaluate(rules, self.given)[0]} if self.given else set()
        return [f for f in evaluate(rules, {**self.given, **self.facts})[0] if (f.id, f.message) not in before]
