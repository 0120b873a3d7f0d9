"""The one argument check every parameter class of the agent uses, and its finiteness test."""

from __future__ import annotations

import math


def require(ok: bool, message: str) -> None:
    """Refuse a bad parameter at construction: ``ValueError(message)`` unless ``ok``."""
    if not ok:
        raise ValueError(message)


def finite(*values: float) -> bool:
    """Whether every value is finite (no NaN, no infinity)."""
    return all(math.isfinite(v) for v in values)
