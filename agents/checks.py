"""The one argument check every parameter class of the agent uses."""

from __future__ import annotations


def require(ok: bool, message: str) -> None:
    """Refuse a bad parameter at construction: ``ValueError(message)`` unless ``ok``."""
    if not ok:
        raise ValueError(message)
