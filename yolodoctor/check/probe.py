"""What every check probe returns: measured facts (for the rule engine and --json) and findings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from yolodoctor.findings import Finding


@dataclass
class ProbeResult:
    facts: dict[str, Any] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)

    def merge(self, other: ProbeResult) -> ProbeResult:
        self.facts.update(other.facts)
        self.findings.extend(other.findings)
        return self
