"""Reading numbers out of records: facts, samples and JSON hold ints, floats, booleans, None and non-finite floats."""

from __future__ import annotations

import math
from typing import Any, TypeGuard


def is_number(v: Any) -> TypeGuard[float]:
    """An int or a float, not a bool."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def is_finite(v: Any) -> TypeGuard[float]:
    """A number (is_number) that is neither NaN nor infinite."""
    return is_number(v) and math.isfinite(v)


def as_number(v: Any) -> float | None:
    """``v`` as a float where it is a number (is_number), else None."""
    return float(v) if is_number(v) else None


def finite(v: Any) -> Any:
    """``v`` with every non-finite float, however deeply nested in dicts, lists and tuples, made None (JSON has no
    NaN)."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [finite(x) for x in v]
    return v
