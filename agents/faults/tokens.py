"""The text form shared by every fault spec: ``key=value`` tokens, values with units.

Probabilities are plain numbers in [0, 1] or percentages (``30%``). Durations
need a unit (``us``, ``ms`` or ``s``) in text so that ``delay=50`` cannot mean
fifty seconds by accident; in a mapping (a TOML table) a bare number is seconds.
Lists of values are comma-separated. Every failure is a :class:`FaultSpecError`
that names the offending token.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

CLEAR = "clear"

_PER_SECOND = {"us": 1e6, "ms": 1e3, "s": 1.0}
_DURATION = re.compile(r"^\s*([-+0-9.eE]+|inf|nan)\s*(us|ms|s)?\s*$")


class FaultSpecError(ValueError):
    """A fault spec that cannot be built; ``token`` is the offending text or field name."""

    def __init__(self, problem: str, token: str | None = None) -> None:
        self.problem = problem
        self.token = token
        super().__init__(f"bad fault token {token!r}: {problem}" if token else problem)


# --- scalar values ----------------------------------------------------------------------


def parse_number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise FaultSpecError(f"{what} must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise FaultSpecError(f"{what} must be finite, got {text!r}")
    return value


def parse_probability(text: str, what: str) -> float:
    raw = text.strip()
    percent = raw.endswith("%")
    value = parse_number(raw[:-1] if percent else raw, what)
    return check_probability(value / 100.0 if percent else value, what)


def parse_duration(text: str, what: str, *, unit_required: bool = True) -> float:
    """Seconds from ``50ms``, ``0.05s`` or ``250us`` (a bare number only if not required)."""
    m = _DURATION.match(text)
    if m is None:
        raise FaultSpecError(f"{what} must be a duration such as 50ms or 0.5s, got {text!r}")
    number, unit = m.groups()
    if unit is None and unit_required:
        raise FaultSpecError(f"{what} needs a unit (us, ms or s), e.g. {number}ms or {number}s")
    return parse_number(number, what) / _PER_SECOND[unit or "s"]  # range: the spec checks


def parse_count(text: str, what: str, lo: int, hi: int) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise FaultSpecError(f"{what} must be an integer, got {text!r}") from None
    if not lo <= value <= hi:
        raise FaultSpecError(f"{what} must be in {lo}..{hi}, got {value}")
    return value


# --- validators (shared with the dataclass constructors) ---------------------------------


def _real(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FaultSpecError(f"{what} must be a number, got {type(value).__name__}")
    f = float(value)
    if not math.isfinite(f):
        raise FaultSpecError(f"{what} must be finite, got {f}")
    return f


def check_probability(value: object, what: str) -> float:
    p = _real(value, what)
    if not 0.0 <= p <= 1.0:
        raise FaultSpecError(f"{what} must be a probability in [0, 1], got {p}")
    return p


def check_duration(value: object, what: str, hi: float = 3600.0) -> float:
    d = _real(value, what)
    if not 0.0 <= d <= hi:
        raise FaultSpecError(f"{what} must be in [0, {hi:g}] seconds, got {d}")
    return d


def check_real(value: object, what: str, lo: float, hi: float) -> float:
    f = _real(value, what)
    if not lo <= f <= hi:
        raise FaultSpecError(f"{what} must be in [{lo:g}, {hi:g}], got {f}")
    return f


# --- formatting -------------------------------------------------------------------------


def format_number(value: float) -> str:
    """The shortest text that parses back to exactly ``value``."""
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def format_duration(seconds: float) -> str:
    """Milliseconds below one second where they parse back exactly, else seconds."""
    if 0.0 < seconds < 1.0:
        ms = format_number(seconds * 1000.0)
        if float(ms) / 1000.0 == seconds:
            return f"{ms}ms"
    return f"{format_number(seconds)}s"


# --- tokens -----------------------------------------------------------------------------


def split_tokens(text: str) -> list[tuple[str, str, str]]:
    """``(token, key, value)`` for each whitespace-separated token; ``clear`` has value ``""``."""
    out: list[tuple[str, str, str]] = []
    for token in text.split():
        if token == CLEAR:
            out.append((token, CLEAR, ""))
            continue
        key, sep, value = token.partition("=")
        if not sep or not key or not value:
            raise FaultSpecError("expected key=value (or 'clear')", token)
        out.append((token, key.lower(), value))
    return out


def unknown_key(token: str, key: str, known: Iterable[str]) -> FaultSpecError:
    names = sorted(set(known))
    close = difflib.get_close_matches(key, names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return FaultSpecError(f"unknown key {key!r} (known: {', '.join(names)}){hint}", token)


def check_clear_alone(tokens: Sequence[tuple[str, str, str]]) -> bool:
    """True when the text is exactly ``clear``; ``clear`` mixed with other tokens is refused."""
    keys = [k for _, k, _ in tokens]
    if CLEAR in keys and len(keys) > 1:
        raise FaultSpecError("'clear' means no faults and cannot be combined", CLEAR)
    return keys == [CLEAR]


def mapping_value_text(key: str, value: object) -> str:
    """The text form of one TOML value: a number, a string, or a (nested) list of them."""
    if isinstance(value, bool):
        raise FaultSpecError(f"{key} cannot be a boolean", key)
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return format_number(float(value))
    if isinstance(value, Sequence):
        nested = any(isinstance(v, Sequence) and not isinstance(v, str) for v in value)
        return ("|" if nested else ",").join(mapping_value_text(key, v) for v in value)
    raise FaultSpecError(f"{key} has an unsupported type {type(value).__name__}", key)


def mapping_tokens(mapping: Mapping[str, object]) -> list[tuple[str, str, str]]:
    """``(token, key, value)`` for each entry of a TOML table, as :func:`split_tokens` gives."""
    if not isinstance(mapping, Mapping):
        raise FaultSpecError(f"a fault table must be a mapping, got {type(mapping).__name__}")
    out = []
    for key, value in mapping.items():
        if not isinstance(key, str):
            raise FaultSpecError(f"keys must be strings, got {key!r}")
        text = mapping_value_text(key, value)
        out.append((f"{key}={text}", key.lower(), text))
    return out


Parser = Callable[[str, bool], dict[str, Any]]
"""One key's value text (and whether units are required) -> the spec's keyword arguments."""

S = TypeVar("S")


def build_spec(
    tokens: Sequence[tuple[str, str, str]],
    parsers: Mapping[str, Parser],
    make: Callable[..., S],
    *,
    strict_units: bool,
    canonical: Mapping[str, str] | None = None,
) -> S:
    """A spec made by ``make`` from parsed tokens; each token is checked on its own first, so an
    error names it. ``canonical`` maps a key's synonyms to one name (set once at most)."""
    if check_clear_alone(tokens):
        return make()
    kwargs: dict[str, Any] = {}
    seen: dict[str, str] = {}
    for token, key, value in tokens:
        parser = parsers.get(key)
        if parser is None:
            raise unknown_key(token, key, [*parsers, CLEAR])
        name = (canonical or {}).get(key, key)
        if name in seen:
            raise FaultSpecError(f"{name} is already set by {seen[name]!r}", token)
        seen[name] = token
        try:
            parsed = parser(value, strict_units)
            make(**parsed)  # validate this token's values on their own
        except FaultSpecError as exc:
            raise FaultSpecError(exc.problem, token) from None
        kwargs.update(parsed)
    return make(**kwargs)
