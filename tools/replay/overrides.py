"""An agent's configuration for a re-run or a scenario: as its log recorded it, and with
``--set KEY=VALUE`` / ``--fusion`` overrides applied (validated by the settings' own
dataclasses; :class:`OverrideError` says what cannot be applied and why).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields, is_dataclass, replace
from typing import Any

from agents.belief import FusionRule
from agents.config import FUSION_NONE, AgentConfig
from protocol.site import parse_site
from tools.agent_config import agent_config, config_from_site
from tools.replay.load import Line
from worlds.arena import Arena

FUSION_CHOICES = (*(r.value for r in FusionRule), FUSION_NONE)
_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}
_DEFAULT = {"none", "default"}  # a ``float | None`` setting back to its derived default


class OverrideError(ValueError):
    """A ``--set`` or ``--fusion`` value that cannot be applied; the message says why."""


def parse_sets(items: Sequence[str]) -> dict[str, str]:
    """``["grid.q_drift=0.1", ...]`` -> ``{"grid.q_drift": "0.1"}``."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key or any(not part for part in key.split(".")):
            raise OverrideError(f"--set {item!r}: expected KEY=VALUE, e.g. grid.q_drift=0.1")
        out[key] = value.strip()
    return out


def _parse_value(text: str, current: object, key: str) -> object:
    if isinstance(current, bool):
        low = text.lower()
        if low in _TRUE | _FALSE:
            return low in _TRUE
        raise OverrideError(f"{key}={text!r}: expected true or false")
    if isinstance(current, int):
        try:
            return int(text)
        except ValueError:
            raise OverrideError(f"{key}={text!r}: expected an integer") from None
    if isinstance(current, float):
        try:
            return float(text)
        except ValueError:
            raise OverrideError(f"{key}={text!r}: expected a number") from None
    if isinstance(current, str):
        return text
    raise OverrideError(f"{key} is a {type(current).__name__}: it cannot be set as KEY=VALUE")


def _optional_number(declared: object) -> bool:
    """Whether a setting declared so is a ``float | None`` (None: a default derived from the
    others, such as ``nav.standoff`` or ``track_confident_spread``)."""
    return str(declared).replace(" ", "") in {"float|None", "None|float"}


def _with(obj: object, path: list[str], text: str, key: str) -> object:
    if not is_dataclass(obj) or isinstance(obj, type):
        raise OverrideError(f"{key}: {type(obj).__name__} has no settings")
    declared = {f.name: f.type for f in fields(obj)}
    names = list(declared)
    name = path[0]
    if name not in names:
        known = ", ".join(names)
        raise OverrideError(f"unknown setting {key!r}; {type(obj).__name__} has: {known}")
    current = getattr(obj, name)
    if len(path) == 1 and _optional_number(declared[name]):
        new = None if text.lower() in _DEFAULT else _parse_value(text, 0.0, key)
    else:
        new = (_parse_value(text, current, key) if len(path) == 1
               else _with(current, path[1:], text, key))
    try:
        return replace(obj, **{name: new})
    except (ValueError, TypeError) as e:
        raise OverrideError(f"{key}={text}: {e}") from None


def apply_overrides(config: AgentConfig, sets: Mapping[str, str]) -> AgentConfig:
    """``config`` with each dotted ``key=value`` applied (validated by the dataclasses)."""
    out: object = config
    for key, text in sets.items():
        out = _with(out, key.split("."), text, key)
    assert isinstance(out, AgentConfig)
    return out


def variant_sets(fusion: str | None, sets: Mapping[str, str]) -> dict[str, str]:
    """The overrides of the variant: ``--fusion`` is ``fusion=...``; ``--set`` wins on conflict."""
    out: dict[str, str] = {}
    if fusion is not None:
        if fusion not in FUSION_CHOICES:
            raise OverrideError(f"--fusion {fusion!r}: one of {', '.join(FUSION_CHOICES)}")
        out["fusion"] = fusion
    out.update(sets)
    return out


def recorded_config(arena: Arena | None, name: str, start: Line | None) -> AgentConfig:
    """The agent's configuration as its log records it: the site and robot settings it
    started from, else (older logs) the arena with its fusion rule and reputation."""
    if start is not None and isinstance(start.get("site_toml"), str) and isinstance(
        start.get("settings"), dict
    ):
        site = parse_site(start["site_toml"], f"{name}'s recorded site")
        return config_from_site(site, start["settings"])
    if arena is None:
        raise ValueError("its log records no site and no arena was found")
    kw: dict[str, Any] = {}
    if start is not None:
        if isinstance(start.get("fusion"), str):
            kw["fusion"] = start["fusion"]
        if isinstance(start.get("reputation"), bool):
            kw["use_reputation"] = start["reputation"]
    return agent_config(arena, name, **kw)


def config_diff(a: object, b: object, prefix: str = "") -> dict[str, tuple[Any, Any]]:
    """Settings (dotted) whose value differs between two configurations."""
    if is_dataclass(a) and is_dataclass(b) and type(a) is type(b):
        out: dict[str, tuple[Any, Any]] = {}
        for f in fields(a):
            out.update(config_diff(getattr(a, f.name), getattr(b, f.name), f"{prefix}{f.name}."))
        return out
    return {} if a == b else {prefix.rstrip("."): (a, b)}


__all__ = [
    "FUSION_CHOICES",
    "OverrideError",
    "apply_overrides",
    "config_diff",
    "parse_sets",
    "recorded_config",
    "variant_sets",
]
