"""Message templates: ``{fact.name}``, ``{fact.name:.1f}`` or ``{fact.name!r}`` replaced by fact values, nothing else.

Python's str.format would follow attributes and indexes (``{x.__class__}``); this formatter treats the whole field
name as one fact key and refuses anything that is not a declared fact, so a rule file cannot reach into objects.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping, Sequence
from typing import Any

MAX_WIDTH = 80


class TemplateError(ValueError):
    pass


class _Formatter(string.Formatter):
    def __init__(self, allowed: set[str] | None) -> None:
        self.allowed = allowed

    def get_field(self, field_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[Any, str]:
        if self.allowed is not None and field_name not in self.allowed:
            raise TemplateError(f"template field {{{field_name}}} is not a declared fact")
        return kwargs.get(field_name), field_name

    def format_field(self, value: Any, format_spec: str) -> str:
        if value is None:
            return "n/a"
        try:
            return format(value, format_spec)
        except (TypeError, ValueError):
            return str(value)


def fields(template: str) -> list[str]:
    try:
        return [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as e:
        raise TemplateError(f"bad template: {e}") from None


def validate(template: str, allowed: set[str]) -> None:
    try:
        parsed = string.Formatter().parse(template)
        nested = [spec for _, f, spec, _ in parsed if f is not None and spec and "{" in spec]
    except ValueError as e:
        raise TemplateError(f"bad template: {e}") from None
    if nested:  # str.format would fill {...} inside a format spec from other fields, recursively
        raise TemplateError(f"a format spec may not hold a field: {{...:{nested[0]}}}")
    wide = [spec for _, f, spec, _ in string.Formatter().parse(template)
            if f is not None and any(int(n) > MAX_WIDTH for n in re.findall(r"\d+", spec or ""))]
    if wide:  # {x:>999999999} would build a string of that many characters
        raise TemplateError(f"format widths and precisions above {MAX_WIDTH} are refused: {{...:{wide[0]}}}")
    bad = [c for _, f, _, c in string.Formatter().parse(template) if f is not None and c not in (None, "r")]
    if bad:
        raise TemplateError(f"the only conversion is !r (the value as Python writes it), not !{bad[0]}")
    for f in fields(template):
        if f == "" or f.isdigit():
            raise TemplateError("template fields must name a fact, e.g. {loader.workers}")
        if f not in allowed:
            raise TemplateError(f"template field {{{f}}} is not one of the rule's facts or values")


def render(template: str, facts: dict[str, Any], allowed: set[str] | None = None) -> str:
    return _Formatter(allowed).vformat(template, (), facts)
