"""The finding and fix records every command reports.

A finding is a named problem with the evidence behind it and, where one exists, a fix. These are plain
dataclasses serialised to the JSON contract; nothing here imports torch or ultralytics.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

CATEGORIES = (
    "environment",
    "dataset",
    "io",
    "dataloader",
    "memory",
    "launch",
    "precision",
    "config",
    "stability",
    "distributed",
    "bound",  # what bounds the training step (rules BD*): read by the headline verdict, never reported as a finding
)


class Severity(IntEnum):
    info = 0
    warning = 1
    error = 2

    @classmethod
    def parse(cls, name: str) -> Severity:
        try:
            return cls[name]
        except KeyError:
            raise ValueError(f"unknown severity {name!r} (choose info, warning or error)") from None


@dataclass(frozen=True)
class Fix:
    """A change that removes a finding: train args, environment variables and torch flags."""

    args: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    torch_flags: dict[str, Any] = field(default_factory=dict)
    safety: str = "safe"  # "safe" | "unsafe"
    changes_training: bool = False
    seconds_saved_per_epoch: float | None = None
    one_off_seconds: float | None = None
    note: str | None = None  # what to do by hand when no argument change does it

    def __post_init__(self) -> None:
        if self.safety not in ("safe", "unsafe"):
            raise ValueError(f"fix safety must be 'safe' or 'unsafe', not {self.safety!r}")
        if self.changes_training and self.safety != "unsafe":
            raise ValueError("a fix that changes training must be marked unsafe")

    def to_dict(self) -> dict[str, Any]:
        d = {
            "args": dict(self.args),
            "env": dict(self.env),
            "torch_flags": dict(self.torch_flags),
            "safety": self.safety,
            "changes_training": self.changes_training,
            "seconds_saved_per_epoch": self.seconds_saved_per_epoch,
            "one_off_seconds": self.one_off_seconds,
        }
        if self.note:
            d["note"] = self.note
        return d


@dataclass(frozen=True)
class Finding:
    id: str
    name: str
    category: str
    severity: Severity
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    fix: Fix | None = None

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ValueError(f"unknown finding category {self.category!r}")
        if not isinstance(self.severity, Severity):
            object.__setattr__(self, "severity", Severity.parse(str(self.severity)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "category": self.category,
            "severity": self.severity.name,
            "message": self.message,
            "evidence": self.evidence,
            "fix": self.fix.to_dict() if self.fix else None,
        }


def worst(findings: list[Finding]) -> Severity | None:
    return max((f.severity for f in findings), default=None)


def exit_code(findings: list[Finding], fail_on: Severity) -> int:
    """0 when nothing is at or above ``fail_on``, else 1."""
    w = worst(findings)
    return 1 if w is not None and w >= fail_on else 0


def ranked(findings: Iterable[Finding]) -> list[Finding]:
    """Worst first; within a severity, the most time saved first, then by category and id."""
    def key(f: Finding) -> tuple[int, float, int, str]:
        saved = f.fix.seconds_saved_per_epoch if f.fix and f.fix.seconds_saved_per_epoch else 0.0
        return (-int(f.severity), -saved, CATEGORIES.index(f.category), f.id)

    return sorted(findings, key=key)
